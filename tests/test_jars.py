"""The jar lock file: one source of truth, hash-verified, optionally served by a Maven repository."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from kafka_iceberg import jars
from kafka_iceberg.errors import JarResolutionError


def test_lock_lists_runtime_for_both_local_and_cluster():
    lock = jars.load_lock()
    runtime = next(j for j in lock.jars if j.name == "iceberg-spark-runtime")
    assert runtime.local and runtime.cluster
    assert runtime.maven == "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
    assert jars.cluster_maven_coordinates() == [
        "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",
        "org.apache.iceberg:iceberg-aws-bundle:1.10.2",
    ]
    for jar in lock.jars:
        if jar.local:
            assert jar.source is not None and len(jar.sha256) == 64, jar.name


def test_resolved_cache_matches_every_locked_hash():
    runtime = jars.resolve_local()
    assert {p.name for p in runtime.jars} == {j.file for j in jars.load_lock().jars if j.local}
    assert jars.verify() == []
    assert (runtime.native_dir / "libsqlitejdbc.so").exists()


def test_tampered_bytes_are_refused(tmp_path):
    member = "snowpark_connect_deps_iceberg/jars/scala-collection-compat_2.12-2.13.0.jar"
    source = jars.Source("pypi-wheel", "snowpark-connect-deps-iceberg", "1.0.2", member)
    art = jars.Artifact(name="x", file="x.jar", sha256="0" * 64, source=source)
    # Reuse the already-downloaded wheel so the test needs no network.
    downloads = jars.cache_dir() / "downloads"
    with pytest.raises(JarResolutionError, match="does not match"):
        jars.fetch(art, tmp_path, downloads)
    assert not (tmp_path / "x.jar").exists()


class _Repo(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def _serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = lambda *a, **kw: _Repo(*a, directory=str(directory), **kw)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("tamper", [False, True])
def test_maven_repository_mode_checks_the_repository_sha1(tmp_path, tamper):
    repo = tmp_path / "repo"
    folder = repo / "org/example/thing/1.0"
    folder.mkdir(parents=True)
    payload = b"jar bytes"
    (folder / "thing-1.0.jar").write_bytes(payload)
    sha1 = hashlib.sha1(b"other" if tamper else payload).hexdigest()
    (folder / "thing-1.0.jar.sha1").write_text(sha1)
    server, url = _serve(repo)
    try:
        art = jars.Artifact(name="thing", file="thing-1.0.jar", sha256="", source=None, maven="org.example:thing:1.0")
        out = tmp_path / "out"
        out.mkdir()
        if tamper:
            with pytest.raises(JarResolutionError, match="sha1"):
                jars.fetch(art, out, tmp_path / "dl", maven_repo=url)
        else:
            assert jars.fetch(art, out, tmp_path / "dl", maven_repo=url).read_bytes() == payload
    finally:
        server.shutdown()
