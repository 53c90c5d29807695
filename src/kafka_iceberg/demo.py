"""``kafka-iceberg demo``: the smallest end-to-end proof that the local lakehouse works.

Starts the stack (owned by this process), creates a namespace and a partitioned table in the
REST catalog through Spark, writes rows to S3, reads them back through pyiceberg — a path
independent of Spark — prints them, and stops the stack.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_iceberg.catalogs import render
from kafka_iceberg.environment import local_resolver
from kafka_iceberg.local.profile import LOCAL_CATALOG, local_catalog_profile
from kafka_iceberg.local.readback import pyiceberg_catalog
from kafka_iceberg.local.stack import LocalStack
from kafka_iceberg.paths import run_dir
from kafka_iceberg.session import attach_catalogs, get_spark

DEMO_NAMESPACE = "demo"
DEMO_TABLE = "readings"


def run_demo(say: Callable[[str], None], stack_dir: Path | None = None) -> list[dict[str, Any]]:
    """Run the demo and return the rows pyiceberg read back."""
    stack = LocalStack(stack_dir or run_dir() / "demo")
    t0 = time.monotonic()
    state = stack.up(owned=True)
    say(
        f"local stack up in {time.monotonic() - t0:.1f}s: kafka {state.kafka_bootstrap}, "
        f"s3 {state.s3_endpoint}, catalog {state.catalog_uri}"
    )
    try:
        spark = get_spark(app_name="kafka-iceberg-demo")
        attach_catalogs(
            spark, [render(LOCAL_CATALOG, local_catalog_profile())], local_resolver(stack_dir=stack.run_dir)
        )
        ident = f"{LOCAL_CATALOG}.{DEMO_NAMESPACE}.{DEMO_TABLE}"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {LOCAL_CATALOG}.{DEMO_NAMESPACE}")
        spark.sql(f"DROP TABLE IF EXISTS {ident} PURGE")
        spark.sql(
            f"CREATE TABLE {ident} (sensor STRING, id BIGINT, ts TIMESTAMP, reading DOUBLE) USING iceberg "
            "PARTITIONED BY (days(ts), bucket(16, id)) TBLPROPERTIES ('format-version'='2')"
        )
        spark.sql(
            f"INSERT INTO {ident} VALUES "
            "('north', 1, TIMESTAMP '2026-11-20 08:00:00', 12.5), "
            "('south', 2, TIMESTAMP '2026-11-20 09:30:00', 14.0), "
            "('north', 3, TIMESTAMP '2026-11-21 10:15:00', 11.75)"
        )
        say(f"spark wrote 3 rows to {ident} (partitioned by days(ts), bucket(16, id))")
        table = pyiceberg_catalog(stack.status()).load_table(f"{DEMO_NAMESPACE}.{DEMO_TABLE}")
        rows: list[dict[str, Any]] = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
        say(f"pyiceberg read {len(rows)} rows back from {table.metadata.location}:")
        for row in rows:
            say(f"  {row}")
        return rows
    finally:
        stack.down()
        say("local stack stopped")
