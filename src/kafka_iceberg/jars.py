"""JVM jars as data: read ``jars.lock.toml``, fetch each jar from Maven Central into a cache, verify it.

Every jar is named by its Maven coordinates and pinned by SHA-256. Three readers share the file:

- local Spark sessions (tests, demo, benchmarks) take the ``spark`` classpath (:func:`resolve_classpath`);
- the local Apache Kafka broker takes the ``broker`` classpath;
- the local schema registry (Apicurio) is a ``[distribution.registry]``: an archive Maven Central
  serves beside the app's jar, unpacked once into the cache (:func:`resolve_distribution`);
- the bundle attaches the ``cluster = true`` coordinates to job clusters as Maven libraries
  (:func:`cluster_maven_coordinates`), so a laptop and a cluster get the same bytes.

:func:`relock` (``kafka-iceberg jars lock``, needs ``mvn``) regenerates the jar list from each
classpath's ``roots``; it is a maintainer's command, never run by ``make``.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
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
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
SPARK, BROKER = "spark", "broker"
CLASSPATHS = (SPARK, BROKER)
REGISTRY = "registry"
ARCHIVES = ("tar.gz",)


@dataclass(frozen=True)
class Artifact:
    """One file of the lock file, named by Maven coordinates ``group:artifact:version``.

    A jar unless ``classifier``/``extension`` say otherwise (``all`` + ``tar.gz``: a distribution).
    """

    maven: str
    sha256: str
    classpath: str
    cluster: bool = False
    classifier: str = ""
    extension: str = "jar"

    @property
    def group(self) -> str:
        """Maven group id."""
        return self.maven.split(":")[0]

    @property
    def name(self) -> str:
        """Maven artifact id."""
        return self.maven.split(":")[1]

    @property
    def version(self) -> str:
        """Maven version."""
        return self.maven.split(":")[2]

    @property
    def file(self) -> str:
        """File name, as Maven names it."""
        classifier = f"-{self.classifier}" if self.classifier else ""
        return f"{self.name}-{self.version}{classifier}.{self.extension}"

    @property
    def path(self) -> str:
        """Path of the jar in a Maven repository layout (and in the cache)."""
        return f"{self.group.replace('.', '/')}/{self.name}/{self.version}/{self.file}"


@dataclass(frozen=True)
class ClasspathRoots:
    """What one classpath asks for, and what its host (Spark's own jars) already provides."""

    roots: tuple[str, ...]
    provided: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lock:
    """The parsed lock file."""

    jars: tuple[Artifact, ...]
    classpaths: dict[str, ClasspathRoots]
    repository: str = MAVEN_CENTRAL
    distributions: dict[str, Artifact] = field(default_factory=dict)

    @property
    def files(self) -> tuple[Artifact, ...]:
        """Every pinned file: the jars, then the distributions."""
        return (*self.jars, *self.distributions.values())


def _pinned(entry: dict[str, Any], where: str) -> tuple[str, str]:
    """``(maven, sha256)`` of a lock entry, checked; ``where`` names the entry in errors."""
    maven = str(entry.get("maven", ""))
    if maven.count(":") != 2 or not all(maven.split(":")):
        raise JarResolutionError(f"{LOCK_FILE.name}: {where}: maven: got {maven!r}; expected 'group:artifact:version'")
    sha = str(entry.get("sha256", ""))
    if len(sha) != 64:
        raise JarResolutionError(f"{LOCK_FILE.name}: {where}: sha256 must be 64 hex digits")
    return maven, sha


def _artifact(entry: dict[str, Any]) -> Artifact:
    maven, sha = _pinned(entry, f"jar {entry.get('maven', '')!r}")
    classpath = str(entry.get("classpath", ""))
    if classpath not in CLASSPATHS:
        raise JarResolutionError(
            f"{LOCK_FILE.name}: jar {maven}: classpath: got {classpath!r}; expected one of {', '.join(CLASSPATHS)}"
        )
    return Artifact(maven=maven, sha256=sha, classpath=classpath, cluster=bool(entry.get("cluster", False)))


def _distribution(name: str, entry: dict[str, Any]) -> Artifact:
    maven, sha = _pinned(entry, f"distribution.{name}")
    extension = str(entry.get("extension", ""))
    if extension not in ARCHIVES:
        expected = ", ".join(ARCHIVES)
        raise JarResolutionError(
            f"{LOCK_FILE.name}: distribution.{name}: extension: got {extension!r}; expected one of {expected}"
        )
    return Artifact(maven, sha, name, classifier=str(entry.get("classifier", "")), extension=extension)


def load_lock(path: Path = LOCK_FILE) -> Lock:
    """Parse the lock file."""
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    classpaths = {
        name: ClasspathRoots(roots=tuple(spec.get("roots", ())), provided=tuple(spec.get("provided", ())))
        for name, spec in (data.get("classpath") or {}).items()
    }
    return Lock(
        jars=tuple(_artifact(e) for e in data.get("jar", [])),
        classpaths=classpaths,
        repository=str(data.get("repository", MAVEN_CENTRAL)),
        distributions={name: _distribution(name, e) for name, e in (data.get("distribution") or {}).items()},
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


def repository(lock: Lock | None = None) -> str:
    """The Maven repository jars come from: ``$KAFKA_ICEBERG_MAVEN_REPO`` or the lock's (Maven Central)."""
    return os.environ.get(MAVEN_REPO_ENV) or (lock or load_lock()).repository


def fetch(art: Artifact, root: Path, repo: str) -> Path:
    """Make ``root/<maven path>`` exist with the locked bytes; return its path.

    Raises:
        JarResolutionError: the download failed or its SHA-256 is not the locked one.
    """
    dest = root / art.path
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    url = f"{repo.rstrip('/')}/{art.path}"
    partial = dest.with_name(dest.name + ".part")
    log.info("fetching %s from %s", art.maven, repo)
    try:
        with urllib.request.urlopen(url, timeout=300) as resp, partial.open("wb") as out:
            shutil.copyfileobj(resp, out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise JarResolutionError(f"{art.maven}: cannot download {url}: {exc}") from exc
    actual = sha256_of(partial)
    if actual != art.sha256:
        partial.unlink()
        raise JarResolutionError(
            f"{art.maven}: {url} has sha256 {actual}, {LOCK_FILE.name} pins {art.sha256}; nothing was cached"
        )
    partial.rename(dest)
    return dest


def resolve_classpath(classpath: str = SPARK, root: Path | None = None) -> tuple[Path, ...]:
    """Fetch (once) and return the jars of one classpath (``spark`` or ``broker``), hashes checked.

    Args:
        classpath: which classpath of the lock file.
        root: cache directory; defaults to ``<cache>/maven`` (:func:`kafka_iceberg.paths.cache_dir`).

    Raises:
        JarResolutionError: a download failed or its bytes did not match the lock file.
    """
    root = root or cache_dir() / "maven"
    lock = load_lock()
    repo = repository(lock)
    with _locked(root):
        return tuple(fetch(a, root, repo) for a in lock.jars if a.classpath == classpath)


def resolve_distribution(name: str = REGISTRY, root: Path | None = None) -> Path:
    """Fetch (once, hash checked) and unpack (once) a distribution; return the unpacked directory.

    Raises:
        JarResolutionError: the lock has no such distribution, or its download failed or differs.
    """
    root = root or cache_dir() / "maven"
    lock = load_lock()
    art = lock.distributions.get(name)
    if art is None:
        raise JarResolutionError(f"{LOCK_FILE.name}: no [distribution.{name}]: {', '.join(lock.distributions)}")
    with _locked(root):
        archive = fetch(art, root, repository(lock))
        unpacked = archive.with_name(archive.name.removesuffix(f".{art.extension}"))
        if not (unpacked / ".unpacked").exists():
            # Unpack beside, then rename: a crash half-way never leaves a directory that looks complete.
            shutil.rmtree(unpacked, ignore_errors=True)
            staging = Path(tempfile.mkdtemp(dir=archive.parent, prefix=".unpacking-"))
            with tarfile.open(archive) as tar:
                tar.extractall(staging, filter="data")
            (staging / ".unpacked").write_text(art.sha256)
            staging.rename(unpacked)
        return unpacked


def resolve_all(root: Path | None = None) -> dict[str, tuple[Path, ...]]:
    """Every classpath and distribution of the lock file, fetched and verified (``make jars``)."""
    root = root or cache_dir() / "maven"
    resolved = {name: resolve_classpath(name, root) for name in CLASSPATHS}
    for name, art in load_lock().distributions.items():
        resolve_distribution(name, root)
        resolved[name] = (root / art.path,)
    return resolved


def verify(root: Path | None = None) -> list[str]:
    """Re-hash every cached jar; return ``coordinates: reason`` for each one missing or altered."""
    root = root or cache_dir() / "maven"
    bad = []
    for art in load_lock().files:
        path = root / art.path
        if not path.exists():
            bad.append(f"{art.maven}: missing from {root} (run `kafka-iceberg jars fetch`)")
        elif (actual := sha256_of(path)) != art.sha256:
            bad.append(f"{art.maven}: {path} has sha256 {actual}, {LOCK_FILE.name} pins {art.sha256}")
    return bad


# -- maintainers: regenerate the jar list ------------------------------------------------------------


def _resolved_by_maven(roots: tuple[str, ...], work: Path) -> list[tuple[str, Path]]:
    """``(coordinates, file)`` of the runtime closure of ``roots``, as Maven resolves it."""
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>"
        for g, a, v in (r.split(":") for r in roots)
    )
    (work / "pom.xml").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kafka-iceberg</groupId><artifactId>relock</artifactId><version>0</version>"
        f"<dependencies>{deps}</dependencies></project>"
    )
    out = work / "list.txt"
    cmd = ["mvn", "-q", "-B", "dependency:list", "-DincludeScope=runtime", f"-DoutputFile={out}"]
    cmd.append("-DoutputAbsoluteArtifactFilename=true")
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise JarResolutionError("mvn dependency:list failed:\n" + (proc.stdout + proc.stderr)[-2000:])
    found = []
    for line in out.read_text().splitlines():
        parts = line.strip().split(":")
        if len(parts) >= 6 and parts[2] == "jar":
            found.append((f"{parts[0]}:{parts[1]}:{parts[3]}", Path(":".join(parts[5:]))))
    return sorted(found)


def relock(path: Path = LOCK_FILE) -> list[Artifact]:
    """Resolve each classpath's ``roots`` with Maven and rewrite the ``[[jar]]`` list of the lock file.

    Jars matching a classpath's ``provided`` patterns (Spark ships them) are left out; the
    ``cluster`` flag of a coordinate already in the lock is kept.
    """
    lock = load_lock(path)
    cluster = {j.maven for j in lock.jars if j.cluster}
    jars: list[Artifact] = []
    for name, spec in lock.classpaths.items():
        with tempfile.TemporaryDirectory() as tmp:
            for maven, file in _resolved_by_maven(spec.roots, Path(tmp)):
                group_artifact = ":".join(maven.split(":")[:2])
                if any(fnmatch.fnmatch(group_artifact, p) for p in spec.provided):
                    continue
                jars.append(Artifact(maven, sha256_of(file), name, cluster=maven in cluster))
    text = path.read_text()
    head = text.split("\n[[jar]]", 1)[0].rstrip() + "\n"
    body = "".join(
        f'\n[[jar]]\nmaven = "{j.maven}"\nsha256 = "{j.sha256}"\nclasspath = "{j.classpath}"\n'
        + ("cluster = true\n" if j.cluster else "")
        for j in jars
    )
    path.write_text(head + body)
    return jars
