"""The SparkSession every job, test, demo and benchmark runs on.

On Databricks (or wherever a session is already active) the running session is reused and no
jar is added: the cluster has the Iceberg runtime from the bundle's Maven libraries. Elsewhere a
local session is built with the jars of ``jars.lock.toml``. Catalogs are attached to the session
at run time with ``spark.conf.set`` because Spark loads catalogs lazily, on first use.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_iceberg import jars
from kafka_iceberg.catalogs import RenderedCatalog
from kafka_iceberg.decode import avro_jvm
from kafka_iceberg.paths import cache_dir
from kafka_iceberg.refs import Resolver

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

MASTER_ENV = "KAFKA_ICEBERG_SPARK_MASTER"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
DRIVER_MEMORY_ENV = "KAFKA_ICEBERG_DRIVER_MEMORY"
# More driver JVM options for local sessions, split like a shell would (make test: C1 only, docs/local-stack.md).
JVM_OPTIONS_ENV = "KAFKA_ICEBERG_JVM_OPTIONS"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
# Spark masks conf values whose key matches this in its UI, logs and event logs; we add
# "credential" (OAuth2 client credentials of REST catalogs) to Spark's default pattern.
REDACTION_REGEX = "(?i)secret|password|token|access[.]key|credential|sas-token|account.key"

LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.extensions": ICEBERG_EXTENSIONS,
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.redaction.regex": REDACTION_REGEX,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Python workers import the installed pyspark, not Spark's zips of it (kafka_iceberg.python_daemon).
    "spark.python.daemon.module": "kafka_iceberg.python_daemon",
}


# Spark SQL settings a run gives its session where it has no value for them (:func:`apply_run_defaults`).
RUN_DEFAULTS: dict[str, str] = {
    # HotSpot never JIT-compiles a method over 8,000 bytes of bytecode; Spark's default limit for
    # whole-stage code (65,535) lets such a method run interpreted. The flatten decoder of a
    # 20-column upsert table (its tombstone key fields add a few columns) crossed 8,000: its decode
    # took 2x the append table's. Over the limit, Spark runs the operators one by one, each compiled.
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # Spark 3.5 plans a job over a cached frame adaptively, the cache as a query stage, and once the
    # stage is read optimizes the rest of the plan again: for the flatten decode of the records the
    # Arrow decoder left to Spark, 0.25-0.4 s a batch whatever their number. The frames cached here
    # are read again as they are, never repartitioned, so AQE has nothing to change there.
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "false",
    # A frame cached here lives for one batch and is read once or twice: compressing its columns
    # costs more than the memory it saves. An upsert's certified rows, cached for the MERGE, took
    # 0.4-0.6 s a 100,000-record batch more with it (benchmarks/fixes.md, stop 57).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}

# A stale or foreign archive is ignored by the JVM; these keep it from saying so on every start.
CLASS_ARCHIVE_QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def _stamped(jar: Path) -> str:
    """``jar`` with its size and modification time, as the JVM checks an archive's classpath."""
    try:
        st = jar.stat()
    except OSError:  # not downloaded yet: a session would not start either
        return str(jar)
    return f"{jar}:{st.st_size}:{st.st_mtime_ns}"


def _java_home() -> str:
    """The JDK spark-submit starts (``$JAVA_HOME``, else ``java`` on ``PATH``), resolved."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.path.realpath(home)
    java = shutil.which("java")
    return os.path.realpath(java) if java else ""


def class_archive_path(classpath: Iterable[Path] | None = None) -> Path:
    """Where this machine's class-data archive is (:mod:`kafka_iceberg.class_archive` records it).

    ``spark-<pyspark version>-<install>-<contents>.jsa``: the JVM checks its classpath against the
    archive's, so each pyspark install (``<install>``, a digest of its location) has its own, and
    ``<contents>`` digests what the archive holds: pyspark, the JDK, the ``spark`` jars (``classpath``)
    and pyspark's own, each with its size and modification time. The JVM ignores an archive whose
    jars have another size or time: a virtualenv made again at the same place gets a new archive
    instead of one every session ignores.
    """
    import pyspark

    spark_jars = tuple(classpath) if classpath is not None else jars.resolve_classpath(jars.SPARK)
    own = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    install = hashlib.sha256(pyspark.__file__.encode()).hexdigest()[:8]
    contents = hashlib.sha256()
    for part in (pyspark.__version__, _java_home(), *map(_stamped, [*spark_jars, *own])):
        contents.update(part.encode() + b"\0")
    return cache_dir() / "jvm" / f"spark-{pyspark.__version__}-{install}-{contents.hexdigest()[:12]}.jsa"


def class_archive_options(classpath: Iterable[Path] | None = None) -> list[str]:
    """Options that map the archive into a local session's JVM, or none when it was not recorded."""
    path = class_archive_path(classpath)
    return [f"-XX:SharedArchiveFile={path}", *CLASS_ARCHIVE_QUIET] if path.is_file() else []


def on_databricks() -> bool:
    """True inside a Databricks runtime."""
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def get_spark(
    *,
    app_name: str = "kafka-iceberg",
    conf: Mapping[str, str] | None = None,
    jvm_options: Iterable[str] = (),
    class_archive: bool = True,
) -> SparkSession:
    """Return the active session, or build a local one with the Iceberg runtime.

    Args:
        app_name: Spark application name of a new local session.
        conf: extra settings for a new local session (ignored when a session already runs).
        jvm_options: extra driver JVM options for a new local session.
        class_archive: map this machine's class-data archive into a new local session's JVM when
            it was recorded (:mod:`kafka_iceberg.class_archive`; false while recording it).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if on_databricks():
        return SparkSession.builder.getOrCreate()
    classpath = jars.resolve_classpath(jars.SPARK)
    # Keep Spark on loopback and quiet.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run this interpreter (same version, same pinned pyarrow), not PATH's python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    options = [
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        # AWS SDK v2 (S3FileIO) checksums only when required: S3-compatible stores (SeaweedFS locally,
        # OSS on clusters, where the bundle sets the same) store chunk-framed bodies verbatim.
        "-Daws.requestChecksumCalculation=when_required",
        "-Daws.responseChecksumValidation=when_required",
        *avro_jvm.LIMIT_OPTIONS,  # a corrupt Avro count is an error, not an OutOfMemoryError (decode/avro_jvm.py)
        *(class_archive_options(classpath) if class_archive else ()),
        *shlex.split(os.environ.get(JVM_OPTIONS_ENV, "")),
        *jvm_options,
    ]
    builder = (
        SparkSession.builder.master(os.environ.get(MASTER_ENV, "local[2]"))
        .appName(app_name)
        .config("spark.jars", ",".join(str(p) for p in classpath))
        .config("spark.driver.extraJavaOptions", " ".join(options))
        .config("spark.executor.extraJavaOptions", " ".join(avro_jvm.LIMIT_OPTIONS))  # masters other than local
        .config("spark.driver.memory", os.environ.get(DRIVER_MEMORY_ENV, "2g"))
    )
    for key, value in {**LOCAL_DEFAULTS, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def apply_run_defaults(spark: SparkSession) -> dict[str, str]:
    """Set each of :data:`RUN_DEFAULTS` that ``spark`` has no value for; returns those set.

    A value the session has wins: the environment's ``spark_conf`` (which only a new local
    session takes, :func:`get_spark`) or the cluster's Spark configuration. A session that
    refuses a setting (Spark Connect on serverless compute) keeps its own.
    """
    from pyspark.errors import PySparkException

    applied = {}
    for key, value in RUN_DEFAULTS.items():
        if spark.conf.get(key, None) is not None:
            continue
        try:
            spark.conf.set(key, value)
        except PySparkException as exc:
            log.info("%s left as the session has it: %s", key, exc)
            continue
        applied[key] = value
    return applied


def attach_catalogs(spark: SparkSession, catalogs: Iterable[RenderedCatalog], resolver: Resolver) -> None:
    """Resolve each catalog's settings with ``resolver``, then :func:`attach_resolved`."""
    catalogs = list(catalogs)
    attach_resolved(spark, catalogs, {c.name: resolver.settings(c.conf) for c in catalogs})


def attach_resolved(
    spark: SparkSession, catalogs: Iterable[RenderedCatalog], values: Mapping[str, Mapping[str, str]]
) -> None:
    """Set each catalog's resolved settings (``values[name]``) on the running session and load the catalog.

    Credentials do not stay in the session's settings: Spark copies every session setting into
    the properties of each job it runs, and event logs record those unredacted (only settings of
    the SparkConf are redacted). A loaded catalog keeps its own copy, so they are dropped once it
    is loaded.
    """
    for catalog in catalogs:
        secret = sorted(catalog.secret_keys & catalog.conf.keys())
        for key, value in values[catalog.name].items():
            if spark.conf.get(key, None) != value:
                spark.conf.set(key, value)
        if secret:
            _load_catalog(spark, catalog.name)
            for key in secret:
                spark.conf.unset(key)
        log.debug("catalog %s attached", catalog.name)


def _load_catalog(spark: SparkSession, name: str) -> None:
    """Make Spark load (and cache) catalog ``name`` now rather than on first use."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is not None:
        jsession.sessionState().catalogManager().catalog(name)
    else:  # Spark Connect: no JVM handle; any statement naming the catalog loads it
        spark.sql(f"SHOW NAMESPACES IN `{name}`").collect()
