"""The jar lock file: Maven coordinates only, SHA-256 pinned, fetched from a Maven repository and verified."""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kafka_iceberg import jars
from kafka_iceberg.errors import JarResolutionError

REPO = Path(__file__).resolve().parents[1]


def test_lock_holds_only_maven_coordinates_with_sha256():
    lock = jars.load_lock()
    assert lock.repository == "https://repo1.maven.org/maven2"
    assert {j.classpath for j in lock.jars} == {"spark", "broker"}
    for jar in lock.jars:
        group, artifact, version = jar.maven.split(":")
        assert group and artifact and version and len(jar.sha256) == 64, jar
    text = jars.LOCK_FILE.read_text()
    for stand_in in ("pypi", "debian", "wheel", "sdist", "[[native]]"):
        assert stand_in not in text.lower(), stand_in


def test_spark_classpath_matches_pyspark_and_clusters_get_the_same_iceberg():
    import pyspark

    spark = {j.name: j.version for j in jars.load_lock().jars if j.classpath == "spark"}
    # Spark's Kafka source must be the pinned pyspark's own version.
    assert spark["spark-sql-kafka-0-10_2.12"] == pyspark.__version__
    assert spark["spark-token-provider-kafka-0-10_2.12"] == pyspark.__version__
    assert spark["iceberg-spark-runtime-3.5_2.12"] == spark["iceberg-aws-bundle"]
    assert jars.cluster_maven_coordinates() == [
        f"org.apache.iceberg:iceberg-aws-bundle:{spark['iceberg-aws-bundle']}",
        f"org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:{spark['iceberg-spark-runtime-3.5_2.12']}",
    ]
    broker = {j.name for j in jars.load_lock().jars if j.classpath == "broker"}
    assert {"kafka_2.13", "kafka-server", "kafka-raft", "kafka-metadata", "kafka-storage"} <= broker


def test_every_locked_jar_is_cached_with_its_pinned_bytes():
    resolved = jars.resolve_all()
    assert {p.name for paths in resolved.values() for p in paths} == {j.file for j in jars.load_lock().files}
    assert jars.verify() == []


def test_the_registry_is_a_pinned_maven_distribution_unpacked_once():
    registry = jars.load_lock().distributions["registry"]
    assert registry.maven.startswith("io.apicurio:apicurio-registry-app:")
    assert registry.file.endswith("-all.tar.gz")
    home = jars.resolve_distribution("registry")
    assert len(list(home.glob("*-runner.jar"))) == 1 and (home / "lib").is_dir()
    marker = home / ".unpacked"
    assert marker.read_text() == registry.sha256
    before = marker.stat().st_mtime_ns
    assert jars.resolve_distribution("registry") == home and marker.stat().st_mtime_ns == before


def test_a_tampered_cached_jar_fails_verification_with_its_coordinates(tmp_path):
    lock = jars.load_lock()
    art = next(j for j in lock.jars if j.name == "commons-pool2")
    cached = jars.cache_dir() / "maven" / art.path
    copy = tmp_path / "maven" / art.path
    copy.parent.mkdir(parents=True)
    data = bytearray(cached.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte changed (a zip's last byte is often already 0)
    copy.write_bytes(bytes(data))
    bad = jars.verify(tmp_path / "maven")
    assert any(line.startswith(f"{art.maven}: ") and "sha256" in line for line in bad), bad
    # ... and through the CLI: exit 1, the coordinates named, no traceback.
    for other in lock.files:
        if other is not art:
            (tmp_path / "maven" / other.path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "maven" / other.path).symlink_to(jars.cache_dir() / "maven" / other.path)
    proc = subprocess.run(
        [sys.executable, "-m", "kafka_iceberg.cli.main", "jars", "verify"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "KAFKA_ICEBERG_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO / "src")},
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert art.maven in proc.stdout and "Traceback" not in proc.stderr


class _Repo(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def _serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = lambda *a, **kw: _Repo(*a, directory=str(directory), **kw)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("tamper", [False, True])
def test_download_is_refused_unless_its_sha256_is_the_pinned_one(tmp_path, tamper):
    repo = tmp_path / "repo"
    payload = b"jar bytes"
    art = jars.Artifact(maven="org.example:thing:1.0", sha256=hashlib.sha256(payload).hexdigest(), classpath="spark")
    served = repo / art.path
    served.parent.mkdir(parents=True)
    served.write_bytes(b"other bytes" if tamper else payload)
    server, url = _serve(repo)
    try:
        cache = tmp_path / "cache"
        if tamper:
            with pytest.raises(JarResolutionError, match=r"org\.example:thing:1\.0: .* has sha256 .* pins"):
                jars.fetch(art, cache, url)
            assert not (cache / art.path).exists()
        else:
            assert jars.fetch(art, cache, url).read_bytes() == payload
    finally:
        server.shutdown()


def test_a_distribution_with_an_unknown_archive_type_is_refused(tmp_path):
    lock = tmp_path / "jars.lock.toml"
    lock.write_text('[distribution.registry]\nmaven = "g:a:1"\nextension = "rar"\nsha256 = "' + "0" * 64 + '"\n')
    with pytest.raises(
        JarResolutionError, match=r"distribution\.registry: extension: got 'rar'; expected one of tar\.gz"
    ):
        jars.load_lock(lock)


def test_a_lock_entry_without_coordinates_is_refused(tmp_path):
    lock = tmp_path / "jars.lock.toml"
    lock.write_text('[[jar]]\nmaven = "thing-1.0.jar"\nsha256 = "' + "0" * 64 + '"\nclasspath = "spark"\n')
    with pytest.raises(JarResolutionError, match="group:artifact:version"):
        jars.load_lock(lock)
