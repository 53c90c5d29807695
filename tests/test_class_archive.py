"""The JVM class-data archive local sessions start from (kafka_iceberg.class_archive)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_iceberg import class_archive, session
from tests.support.project import BIN, REPO

SHARED = "shared objects file (top)"  # what -Xlog:class+load says of a class mapped from the archive


def test_a_local_session_maps_the_archive_make_jars_recorded(tmp_path):
    # `make jars` ran `kafka-iceberg jars archive`; run again, it finds the archive and says where.
    listed = subprocess.run([str(BIN / "kafka-iceberg"), "jars", "archive"], capture_output=True, text=True,
                            cwd=REPO, timeout=600, check=False)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    archive = Path(listed.stdout.strip())
    assert archive == session.class_archive_path() and archive.stat().st_size > 50_000_000

    log = tmp_path / "classes.log"
    script = (
        "from kafka_iceberg.session import get_spark\n"
        f"get_spark(jvm_options=['-Xlog:class+load=info:file={log}']).sql('SELECT 1').collect()\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    sources = dict(re.findall(r"\[class,load\] (\S+) source: (.+)$", log.read_text(), re.MULTILINE))
    # Spark's own classes and the lock's (Iceberg, loaded through spark.jars) come from the archive.
    assert sources["org.apache.spark.sql.SparkSession"] == SHARED
    assert sources["org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"] == SHARED
    # Of the classes read from a file (the rest are generated), nearly all came from an archive:
    # this one, or the JDK's own for the JDK's classes. Janino's jar is signed, which CDS skips.
    mapped = sum(source.startswith("shared objects file") for source in sources.values())
    read = sum(source.startswith(("jar:", "file:")) for source in sources.values())
    assert mapped > 0.9 * (mapped + read), f"{mapped} classes mapped, {read} read from jars"
    assert "cds" not in run.stderr.lower()


def test_an_archive_of_another_classpath_is_ignored_without_a_word():
    archive = session.class_archive_path()
    assert archive.is_file()
    java = shutil.which("java")
    assert java is not None
    # `java -version` has none of Spark's classpath: the archive does not match and is not used.
    run = subprocess.run([java, f"-XX:SharedArchiveFile={archive}", *session.CLASS_ARCHIVE_QUIET, "-version"],
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert run.returncode == 0
    assert "archive" not in run.stderr.lower() and "warning" not in run.stderr.lower(), run.stderr


def test_jars_made_again_at_the_same_place_get_another_archive(tmp_path):
    """The JVM ignores an archive whose classpath jars changed size or time (a virtualenv made again)."""
    jar = tmp_path / "iceberg-spark-runtime.jar"
    jar.write_bytes(b"PK")
    before = session.class_archive_path([jar])
    assert session.class_archive_path([jar]) == before  # stable while nothing changes
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 10**9))
    touched = session.class_archive_path([jar])
    jar.write_bytes(b"PK\x03")
    assert len({before, touched, session.class_archive_path([jar])}) == 3
    assert before.name.split("-")[:3] == touched.name.split("-")[:3]  # same install: the old one is replaced


def test_no_archive_no_option(tmp_path, monkeypatch):
    # Naming a missing archive would also turn off the JDK's own default one.
    path = tmp_path / "jvm" / "spark-x.jsa"
    monkeypatch.setattr(session, "class_archive_path", lambda _classpath=None: path)
    assert session.class_archive_options() == []
    path.parent.mkdir()
    path.write_bytes(b"x")
    assert session.class_archive_options() == [f"-XX:SharedArchiveFile={path}", *session.CLASS_ARCHIVE_QUIET]


def _fake_jvm(returncode: int, writes: bool):
    """Stands in for the recording process only: what it leaves behind, not what a JVM does."""

    def run(command, **_kwargs):
        if writes:
            Path(command[-2]).write_bytes(b"archive")
        return subprocess.CompletedProcess(command, returncode, "", "jvm said no" if returncode else "")

    return run


def test_recording_renames_into_place_and_drops_this_installs_stale_archives(tmp_path, monkeypatch):
    path = tmp_path / "jvm" / "spark-3.5.7-aaaa1111-new.jsa"
    path.parent.mkdir()
    stale = path.parent / "spark-3.5.7-aaaa1111-old.jsa"  # this install, other jars
    other = path.parent / "spark-3.5.7-bbbb2222-new.jsa"  # another checkout's pyspark
    stale.write_bytes(b"old")
    other.write_bytes(b"other")
    monkeypatch.setattr(class_archive, "class_archive_path", lambda: path)
    monkeypatch.setattr(class_archive.subprocess, "run", _fake_jvm(0, writes=True))
    assert class_archive.record() == path
    assert path.read_bytes() == b"archive" and not stale.exists() and other.exists()
    # Already there: not recorded again unless forced.
    monkeypatch.setattr(class_archive.subprocess, "run", _fake_jvm(1, writes=False))
    assert class_archive.record() == path
    with pytest.raises(RuntimeError, match="jvm said no"):
        class_archive.record(force=True)
    assert path.read_bytes() == b"archive"  # a failed recording leaves the last good archive
