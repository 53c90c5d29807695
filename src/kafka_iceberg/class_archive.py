"""Recording the class-data archive local sessions start from: Spark, Iceberg and the AWS SDK load faster.

Every local run starts a JVM that loads and verifies some 13,000 classes from Spark's and the
lock's jars before its first query returns: 9.4 s of a 2-core machine. Java's application
class-data sharing (``-XX:ArchiveClassesAtExit``, JDK 13+) records the classes a representative
session loaded, parsed and verified into one file that later JVMs map instead: 6.3 s.

``make jars`` records it once per machine (``kafka-iceberg jars archive``) into the cache, named
after what it depends on (:func:`kafka_iceberg.session.class_archive_path`), and
:func:`kafka_iceberg.session.get_spark` maps it when it is there. A JVM that finds it does not
match (another JDK build, another classpath) ignores it and loads classes as usual. Databricks
clusters never use it: their sessions already run.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_iceberg.catalogs import RestAuth, RestCatalog, S3Storage, render
from kafka_iceberg.session import CLASS_ARCHIVE_QUIET, class_archive_path, get_spark

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame

NOWHERE = "127.0.0.1:9"  # the discard port: nothing listens, a connection is refused at once
BYTES = "org.apache.kafka.common.serialization.ByteArrayDeserializer"


def record(force: bool = False) -> Path:
    """Record the archive (unless it exists and ``force`` is false) by running :func:`_workload` once.

    The JVM writes it as it exits, so the workload runs in a process of its own; it is written
    under a temporary name and renamed, so no JVM ever maps half of one. This install's archives
    of another pyspark, JDK or jar set are removed; other installs' (another checkout) are kept.
    """
    path = class_archive_path()
    if path.is_file() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".recording-", dir=path.parent) as work:  # one filesystem: rename
        partial = Path(work) / path.name
        done = subprocess.run(
            [sys.executable, "-m", "kafka_iceberg.class_archive", str(partial), work],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not partial.is_file():
            raise RuntimeError(f"recording {path.name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        os.replace(partial, path)
    install = path.name.split("-")[2]
    for old in path.parent.glob(f"spark-*-{install}-*.jsa"):  # ~160 MB each; a stale one is never mapped again
        if old != path:
            old.unlink(missing_ok=True)
    return path


def _workload(archive: str, work: str) -> None:
    """What a run's JVM loads.

    The Iceberg catalog and writes, Python and Arrow tasks, a streaming query, Spark's Kafka
    source, and clients of Kafka, the REST catalog (SigV4) and S3 trying a server that is not there.
    """
    from pyspark.sql import functions as F

    warehouse = Path(work) / "warehouse"
    spark = get_spark(
        app_name="kafka-iceberg-class-archive",
        conf={
            "spark.sql.catalog.warm": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.warm.type": "hadoop",
            "spark.sql.catalog.warm.warehouse": warehouse.as_uri(),
        },
        jvm_options=[f"-XX:ArchiveClassesAtExit={archive}", *CLASS_ARCHIVE_QUIET],
        class_archive=False,
    )
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    spark.sql(
        "CREATE TABLE warm.ns.events (id BIGINT, body STRING, at TIMESTAMP) USING iceberg PARTITIONED BY (days(at))"
    )
    frame = spark.createDataFrame([(1, '{"a": 1}', "2024-05-01 00:00:00")], "id long, body string, at string")
    frame = frame.withColumn("at", F.to_timestamp("at")).withColumn("parsed", F.from_json("body", "a int"))
    frame.mapInArrow(lambda batches: batches, frame.schema).drop("parsed").writeTo("warm.ns.events").append()
    spark.sql("MERGE INTO warm.ns.events t USING (SELECT 1 AS id, 'x' AS body, current_timestamp() AS at) s "
              "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").collect()  # fmt: skip
    spark.sql("SELECT count(*), max(at) FROM warm.ns.events").collect()
    spark.sql("SELECT * FROM warm.ns.events.snapshots").collect()

    source = Path(work) / "source"
    source.mkdir()
    (source / "0.json").write_text('{"id": 2, "body": "b"}\n')
    query = (
        spark.readStream.schema("id long, body string").json(str(source))
        .writeStream.trigger(availableNow=True).option("checkpointLocation", str(Path(work) / "checkpoint"))
        .foreachBatch(_count)
        .start()
    )  # fmt: skip
    query.awaitTermination()
    kafka = spark.readStream.format("kafka").option("kafka.bootstrap.servers", NOWHERE)
    kafka.option("subscribe", "warm").load().selectExpr("CAST(value AS STRING)").schema  # noqa: B018

    # Clients of the servers a run talks to, built and sent one request that cannot connect:
    # what loads is what a run loads before its first answer (connecting is not the point).
    jvm = spark._jvm
    assert jvm is not None
    props = jvm.java.util.Properties()
    for key, value in {"bootstrap.servers": NOWHERE, "request.timeout.ms": "500", "default.api.timeout.ms": "500",
                       "key.deserializer": BYTES, "value.deserializer": BYTES}.items():  # fmt: skip
        props.put(key, value)
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props)
    _attempt(lambda: consumer.listTopics(jvm.java.time.Duration.ofMillis(500)))
    consumer.close()
    admin = jvm.org.apache.kafka.clients.admin.AdminClient.create(props)
    _attempt(lambda: admin.listTopics().names().get(500, jvm.java.util.concurrent.TimeUnit.MILLISECONDS))
    admin.close()
    # A SigV4-signed REST catalog on S3 as environments declare one (s3tables, osstables), rendered
    # by the same code, so the archive holds the classes those settings load.
    signed = RestAuth(type="sigv4", signing_name="s3tables", signing_region="us-east-1", access_key_id="archive",
                      secret_access_key="archive")  # fmt: skip
    storage = S3Storage(type="s3", endpoint=f"http://{NOWHERE}", region="us-east-1", path_style=True,
                        access_key_id="archive", secret_access_key="archive")  # fmt: skip
    remote = render("remote", RestCatalog(type="rest", uri=f"http://{NOWHERE}", auth=signed, storage=storage))
    for key, value in remote.conf.items():
        spark.conf.set(key, value)
    _attempt(lambda: spark.sql("SHOW NAMESPACES IN remote").collect())
    s3 = jvm.org.apache.iceberg.aws.s3.S3FileIO()
    s3.initialize(remote.properties())  # the catalog's own S3 settings, as a table's FileIO gets them
    _attempt(lambda: s3.newInputFile("s3://warm/events/data.parquet").exists())
    s3.close()

    # The JVM writes the archive as it exits: stop Spark, let the gateway go, and wait for it.
    process = gateway.proc
    spark.stop()
    gateway.shutdown()
    process.stdin.close()
    process.wait(timeout=300)


def _attempt(call: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # expected: nothing listens there
        call()


def _count(batch: DataFrame, _batch_id: int) -> None:
    batch.count()


if __name__ == "__main__":
    _workload(sys.argv[1], sys.argv[2])
