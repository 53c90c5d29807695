"""Spark with the Iceberg runtime against each catalog kind the local runtime supports."""

from __future__ import annotations

import datetime as dt
import os
import shlex
import sqlite3
from pathlib import Path

import pytest

from kafka_iceberg.catalogs import JdbcCatalog, render
from kafka_iceberg.python_daemon import spark_archives
from kafka_iceberg.refs import Resolver
from kafka_iceberg.session import JVM_OPTIONS_ENV, RUN_DEFAULTS, apply_run_defaults, attach_catalogs, get_spark

UTC = dt.timezone.utc


def test_get_spark_reuses_the_active_session(spark):
    assert get_spark() is spark
    assert spark.conf.get("spark.sql.extensions") == "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


HUGE_METHOD_LIMIT = "spark.sql.codegen.hugeMethodLimit"
CACHED_PLANS = "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"
CACHE_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


@pytest.fixture
def without_run_defaults(spark):
    """The shared session with no value for the run's defaults (an earlier run set them), restored after."""
    before = {key: spark.conf.get(key, None) for key in RUN_DEFAULTS}
    for key in RUN_DEFAULTS:
        spark.conf.unset(key)
    yield spark
    for key, value in before.items():
        spark.conf.unset(key)
        if value is not None:
            spark.conf.set(key, value)


def test_a_run_gives_its_session_the_defaults_it_has_no_value_for(without_run_defaults):
    spark = without_run_defaults
    assert apply_run_defaults(spark) == {HUGE_METHOD_LIMIT: "8000", CACHED_PLANS: "false", CACHE_COMPRESSED: "false"}
    assert spark.conf.get(HUGE_METHOD_LIMIT) == "8000"
    assert spark.conf.get(CACHED_PLANS) == "false"
    assert spark.conf.get(CACHE_COMPRESSED) == "false"
    spark.conf.unset(CACHED_PLANS)
    spark.conf.set(HUGE_METHOD_LIMIT, "20000")  # the environment's spark_conf, or the cluster's
    spark.conf.set(CACHE_COMPRESSED, "true")
    assert apply_run_defaults(spark) == {CACHED_PLANS: "false"}
    assert spark.conf.get(HUGE_METHOD_LIMIT) == "20000"
    assert spark.conf.get(CACHE_COMPRESSED) == "true"


def test_the_session_a_run_opens_has_the_run_defaults(without_run_defaults):
    from kafka_iceberg.environment import Environment
    from kafka_iceberg.run import prepared as runtime
    from kafka_iceberg.run.settings import resolve

    env = Environment.model_validate({"kafka": {"bootstrap_servers": "127.0.0.1:9092"}, "checkpoint_root": "/tmp/ck"})
    resolved = resolve(env, [], environ={})
    prepared = runtime.Prepared(env, (), resolved.rendered, resolved.sources, resolved.settings)
    assert runtime.open_session(prepared) is without_run_defaults
    assert {key: without_run_defaults.conf.get(key) for key in RUN_DEFAULTS} == RUN_DEFAULTS


def test_a_session_refusing_a_default_keeps_its_own_and_the_run_goes_on(caplog):
    from pyspark.errors import PySparkException

    class RefusingConf:  # what Spark Connect on serverless compute answers
        def get(self, key, default=None):
            return default

        def set(self, key, value):
            raise PySparkException(f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available.")

    class Session:
        conf = RefusingConf()

    with caplog.at_level("INFO", logger="kafka_iceberg.session"):
        assert apply_run_defaults(Session()) == {}
    assert all(key in caplog.text for key in RUN_DEFAULTS)


def test_the_driver_jvm_runs_with_the_options_of_the_environment(spark):
    wanted = shlex.split(os.environ[JVM_OPTIONS_ENV])
    assert wanted, "tests/conftest.py sets the tests' JVM options"
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(wanted) <= set(runtime.getInputArguments()), list(runtime.getInputArguments())


def _worker_view(batches):
    import importlib
    import sys

    import pyarrow as pa
    import pyspark

    for _ in batches:
        pass
    # What the task's own invalidate_caches() re-reads: importers of zip files still cached.
    zips = [p for p, f in sys.path_importer_cache.items() if type(f).__name__ == "zipimporter"]
    importlib.invalidate_caches()
    yield pa.RecordBatch.from_pylist([{"path": sys.path, "pyspark": pyspark.__file__, "zips": zips}])


def test_python_workers_import_the_installed_pyspark_not_sparks_zips_of_it(spark):
    import pyspark

    row = spark.range(1).mapInArrow(_worker_view, "path array<string>, pyspark string, zips array<string>").first()
    assert row["pyspark"] == pyspark.__file__  # the driver's own: the same install, with its bytecode
    archives = [p for p in row["path"] if p.endswith((".zip", ".jar")) and "site-packages/pyspark" in p]
    assert not archives, row["path"]
    assert not [z for z in row["zips"] if "site-packages/pyspark" in z], row["zips"]


def _daemon_view(batches):
    import os

    import pyarrow as pa

    for _ in batches:
        pass
    # The worker's parent is the daemon it was forked from: the shared objects it has mapped.
    with open(f"/proc/{os.getppid()}/maps") as maps:
        mapped = sorted({line.split()[-1] for line in maps if line.rstrip().endswith(".so")})
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
        command = cmdline.read().replace(b"\0", b" ").decode()
    yield pa.RecordBatch.from_pylist([{"daemon": command, "mapped": mapped}])


def test_python_workers_are_forked_with_the_arrow_tasks_modules_already_imported(spark):
    """A worker Spark starts after another stopped idle does not import pyarrow, Parquet, pyiceberg again."""
    row = spark.range(1).mapInArrow(_daemon_view, "daemon string, mapped array<string>").first()
    assert "kafka_iceberg.python_daemon" in row["daemon"], row["daemon"]
    names = {Path(p).name.split(".")[0] for p in row["mapped"]}
    # pyarrow's Parquet, JSON and CSV readers, numpy's core and pydantic (pyiceberg's models).
    assert {"_parquet", "_json", "_csv", "_multiarray_umath", "_pydantic_core"} <= names, sorted(names)


def test_the_daemon_imports_the_arrow_tasks_modules_before_it_forks_any_worker(tmp_path):
    import subprocess
    import sys

    # Spark's daemon replaced by a report of what was imported by the time it would have started.
    code = (
        "import sys, pyspark.daemon as d\n"
        "d.manager = lambda: print(' '.join(m for m in PRELOADED if m in sys.modules))\n"
        "from kafka_iceberg.python_daemon import PRELOADED, main\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    from kafka_iceberg.python_daemon import PRELOADED

    assert out.stdout.split() == list(PRELOADED), out.stdout
    assert "kafka_iceberg.write.certified" in PRELOADED and "pyiceberg.io.pyarrow" in PRELOADED


def test_preloading_leaves_a_module_that_cannot_be_imported_to_the_task():
    from kafka_iceberg.python_daemon import preload

    assert preload(["json", "kafka_iceberg_no_such_module", "csv"]) == ["json", "csv"]


def test_sparks_archives_stay_when_they_are_the_only_pyspark(tmp_path):
    installed = Path(pyspark_home := os.path.dirname(__import__("pyspark").__file__))
    lib, jars = installed / "python" / "lib", installed / "jars"
    zips = [str(lib / "pyspark.zip"), *(str(p) for p in sorted(lib.glob("py4j-*-src.zip")))]
    core = [str(p) for p in sorted(jars.glob("spark-core_*.jar"))]
    site = os.path.dirname(pyspark_home)
    assert spark_archives([*zips, *core, site]) == [*zips, *core]
    # A Spark distribution's own zips, pyspark not installed beside them: they are all there is.
    tarball = tmp_path / "spark-3.5.7-bin" / "python" / "lib"
    tarball.mkdir(parents=True)
    assert spark_archives([str(tarball / "pyspark.zip"), *core, str(tmp_path)]) == []
    # Another install's zips with this pyspark importable: the zips are kept, they are another version.
    assert spark_archives([str(tarball / "pyspark.zip"), site]) == []


@pytest.mark.integration
def test_rest_catalog_on_s3_create_append_merge_evolve_read_back(lake):
    spark, ns = lake.spark, lake.new_namespace("found")
    ident = f"{lake.catalog}.{ns}.events"
    spark.sql(
        f"CREATE TABLE {ident} (name STRING, id BIGINT, ts TIMESTAMP) USING iceberg "
        "PARTITIONED BY (days(ts), bucket(16, id)) TBLPROPERTIES ('format-version'='2')"
    )
    spark.sql(
        f"INSERT INTO {ident} VALUES ('a', 1, TIMESTAMP '2026-01-01 10:00:00'), "
        "('b', 2, TIMESTAMP '2026-01-02 11:00:00'), ('c', 3, TIMESTAMP '2026-01-02 12:00:00')"
    )
    spark.createDataFrame([("B", 2), ("d", 4)], "name STRING, id BIGINT").createOrReplaceTempView("updates")
    spark.sql(
        f"MERGE INTO {ident} t USING updates s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.name = s.name "
        "WHEN NOT MATCHED THEN INSERT (name, id, ts) VALUES (s.name, s.id, TIMESTAMP '2026-01-03 00:00:00')"
    )
    spark.sql(f"ALTER TABLE {ident} ADD COLUMN note STRING")
    spark.sql(f"UPDATE {ident} SET note = 'late' WHERE id = 4")

    table = lake.pyiceberg().load_table(f"{ns}.events")
    assert [f.name for f in table.schema().fields] == ["name", "id", "ts", "note"]
    assert [str(f.transform) for f in table.spec().fields] == ["day", "bucket[16]"]
    assert table.metadata.location.startswith("s3://warehouse/")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [
        {"name": "a", "id": 1, "ts": dt.datetime(2026, 1, 1, 10, tzinfo=UTC), "note": None},
        {"name": "B", "id": 2, "ts": dt.datetime(2026, 1, 2, 11, tzinfo=UTC), "note": None},
        {"name": "c", "id": 3, "ts": dt.datetime(2026, 1, 2, 12, tzinfo=UTC), "note": None},
        {"name": "d", "id": 4, "ts": dt.datetime(2026, 1, 3, tzinfo=UTC), "note": "late"},
    ]
    operations = [s.summary.operation.value for s in table.snapshots()]
    assert operations[0] == "append" and len(operations) >= 3


def test_hadoop_catalog_on_local_disk(spark, files_catalog):
    spark.sql(f"CREATE TABLE {files_catalog}.db.t (id BIGINT, v STRING) USING iceberg PARTITIONED BY (bucket(4, id))")
    spark.sql(f"INSERT INTO {files_catalog}.db.t VALUES (1, 'x'), (2, 'y')")
    assert sorted(r.id for r in spark.table(f"{files_catalog}.db.t").collect()) == [1, 2]


def test_jdbc_catalog_on_sqlite(spark, tmp_path):
    db = tmp_path / "catalog.db"
    profile = JdbcCatalog(type="jdbc", uri=f"jdbc:sqlite:{db}", warehouse=f"file://{tmp_path}/wh")
    attach_catalogs(spark, [render("sqlcat", profile)], Resolver(env={}))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS sqlcat.db")
    spark.sql("CREATE TABLE sqlcat.db.t (id BIGINT) USING iceberg")
    spark.sql("INSERT INTO sqlcat.db.t VALUES (7)")
    assert [r.id for r in spark.table("sqlcat.db.t").collect()] == [7]
    # The catalog really lives in SQLite: read it without Spark.
    with sqlite3.connect(db) as conn:
        names = conn.execute("SELECT table_namespace, table_name FROM iceberg_tables").fetchall()
    assert names == [("db", "t")]


def test_credentials_leave_the_session_settings_once_the_catalog_is_loaded(spark, tmp_path):
    """Spark copies session settings into every job's properties, which event logs keep unredacted:
    a catalog's credentials must not stay there, and the loaded catalog must still work without them."""
    db = tmp_path / "catalog.db"
    profile = JdbcCatalog(
        type="jdbc", uri=f"jdbc:sqlite:{db}", warehouse=f"file://{tmp_path}/wh", user="u", password="${secret:s/pw}"
    )
    rendered = render("token_store", profile)
    attach_catalogs(spark, [rendered], Resolver(env={"KAFKA_ICEBERG_SECRET__S__PW": "pw-3f9a1c7e5b"}))
    settings = {r.key: r.value for r in spark.sql("SET").collect()}
    assert "pw-3f9a1c7e5b" not in str(settings)
    assert "spark.sql.catalog.token_store.jdbc.password" not in settings
    assert "spark.sql.catalog.token_store.uri" in settings  # the rest stays
    spark.sql("CREATE NAMESPACE IF NOT EXISTS token_store.db")
    spark.sql("CREATE TABLE token_store.db.t (id BIGINT) USING iceberg")
    spark.sql("INSERT INTO token_store.db.t VALUES (3)")
    assert [r.id for r in spark.table("token_store.db.t").collect()] == [3]
