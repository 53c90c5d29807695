"""Write-stage throughput: one batch of N rows per commit mode, REST catalog on S3 against local disk.

Starts its own local stack (SeaweedFS only, owned by this process), attaches the local REST catalog
(``lake``) and a Hadoop catalog on local disk (``files``, the in-run baseline), and times
``TableWriter.commit`` for:

- append: N rows into an empty table;
- overwrite: N rows replacing all 8 ``pt`` partitions of a table holding N rows;
- upsert: N rows (half existing keys with newer offsets, half new) merged into a table holding N rows.

Table creation and seeding are not timed. Each measurement is repeated (``--repeat``, catalogs in
alternating order, each time into a fresh table) and the best time is reported, since the 2 cores
are shared with other Spark jobs; every time and the load average are kept in the JSON. Prints
rows/s and the REST/Hadoop ratios and writes ``benchmarks/results/write.json``.

    python benchmarks/write_bench.py [--rows 1000000] [--repeat 3] [--out benchmarks/results/write.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka_iceberg.catalogs import HadoopCatalog, render
from kafka_iceberg.environment import local_resolver
from kafka_iceberg.local.profile import LOCAL_CATALOG, local_catalog_profile
from kafka_iceberg.local.stack import LocalStack
from kafka_iceberg.refs import Resolver
from kafka_iceberg.session import attach_catalogs, get_spark
from kafka_iceberg.spec.model import TableSpec
from kafka_iceberg.write import CommitMarker, TableWriter

MODES = ("append", "overwrite", "upsert")
PARTITIONS = 8
OUT_DEFAULT = Path(__file__).with_name("results") / "write.json"


def spec(name: str, mode: str) -> TableSpec:
    return TableSpec.model_validate(
        {
            "name": name,
            "namespace": "bench",
            "source": {"topics": ["bench"], "format": "json"},
            "partition_window": "none",
            "partitioning": ["pt"],
            "commit_mode": mode,
            "key_fields": ["id"] if mode == "upsert" else [],
        }
    )


def batch(spark: Any, start: int, rows: int, offset_base: int) -> Any:
    """``rows`` rows with ids from ``start``; cached and materialised so generation is not timed."""
    df = spark.range(start, start + rows).selectExpr(
        "id",
        "concat('name-', id) AS name",
        "CAST(id % 1000 AS DOUBLE) * 1.5 AS amount",
        "TIMESTAMP '2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 86400) AS ts",
        f"concat('p', CAST(id % {PARTITIONS} AS STRING)) AS pt",
        "'bench' AS topic",
        "CAST(id % 4 AS INT) AS `partition`",
        f"id + {offset_base} AS `offset`",
    )
    df = df.cache()
    df.count()
    return df


def marker(batch_id: int, rows: int) -> CommitMarker:
    return CommitMarker(stream="bench", batch_id=batch_id, offsets={"bench": {0: rows * (batch_id + 1)}})


def run_mode(spark: Any, catalog: str, mode: str, rows: int, data: dict[str, Any]) -> dict[str, Any]:
    name = f"{mode}_{int(time.time() * 1000) % 10**8}"
    writer = TableWriter(spark, catalog, spec(name, mode), pipeline_id="bench")
    writer.apply(writer.plan(data["base"].schema))
    batch_id = 0
    if mode in ("overwrite", "upsert"):  # seed the table with N rows (untimed)
        seeder = TableWriter(spark, catalog, spec(name, "append"), pipeline_id="bench")
        seeder.commit(data["base"], CommitMarker(stream="seed", batch_id=0, offsets={"bench": {0: rows}}))
    source = data["upsert"] if mode == "upsert" else data["base"]
    started = time.monotonic()
    result = writer.commit(source, marker(batch_id, rows))
    seconds = time.monotonic() - started
    return {
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds),
        "records_written": result.records_written,
        "files_added": result.files_added,
        "bytes_added": result.bytes_added,
        "retries": result.retries,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT_DEFAULT)
    args = parser.parse_args()
    rows: int = args.rows

    with tempfile.TemporaryDirectory(prefix="write-bench-") as tmp:
        stack = LocalStack(Path(tmp) / "stack", services=("seaweedfs",))
        stack.up(owned=True)
        try:
            spark = get_spark(app_name="kafka-iceberg-write-bench")
            resolver = local_resolver(stack_dir=stack.run_dir)
            attach_catalogs(spark, [render(LOCAL_CATALOG, local_catalog_profile())], resolver)
            warehouse = HadoopCatalog(type="hadoop", warehouse=f"file://{tmp}/warehouse")
            attach_catalogs(spark, [render("files", warehouse)], Resolver(env={}))
            data = {
                "base": batch(spark, 0, rows, 0),
                "upsert": batch(spark, rows // 2, rows, rows),  # half updates (newer offsets), half inserts
            }
            # Warm-up: JIT, first CREATE/MERGE in the session; not reported.
            for catalog in ("files", LOCAL_CATALOG):
                small = {k: v.limit(1000) for k, v in data.items()}
                for mode in MODES:
                    run_mode(spark, catalog, mode, 1000, small)
            results: dict[str, dict[str, Any]] = {}
            load_before = os.getloadavg()
            for mode in MODES:
                runs: dict[str, list[dict[str, Any]]] = {"files": [], LOCAL_CATALOG: []}
                for rep in range(args.repeat):
                    order = ("files", LOCAL_CATALOG) if rep % 2 == 0 else (LOCAL_CATALOG, "files")
                    for catalog in order:
                        runs[catalog].append(run_mode(spark, catalog, mode, rows, data))
                hadoop = min(runs["files"], key=lambda r: r["seconds"])
                rest = min(runs[LOCAL_CATALOG], key=lambda r: r["seconds"])
                results[mode] = {
                    "hadoop_local_disk": {**hadoop, "all_seconds": [r["seconds"] for r in runs["files"]]},
                    "rest_s3": {**rest, "all_seconds": [r["seconds"] for r in runs[LOCAL_CATALOG]]},
                    "rest_over_hadoop_seconds": round(rest["seconds"] / hadoop["seconds"], 2),
                }
                print(
                    f"{mode:9s}  hadoop {hadoop['rows_per_second']:>9,} rows/s ({hadoop['seconds']:.2f}s)   "
                    f"rest+s3 {rest['rows_per_second']:>9,} rows/s ({rest['seconds']:.2f}s)   "
                    f"REST/Hadoop time {results[mode]['rest_over_hadoop_seconds']:.2f}x",
                    flush=True,
                )
            load_after = os.getloadavg()
        finally:
            stack.down()

    report = {
        "benchmark": "write",
        "rows_per_commit": rows,
        "partitions": PARTITIONS,
        "repeat": args.repeat,
        "reported": "best of the repeats; rows_per_second = rows_per_commit / seconds of one commit()",
        "modes": results,
        "environment": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "spark_master": os.environ.get("KAFKA_ICEBERG_SPARK_MASTER", "local[2]"),
            "load_average_1m_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
            "catalogs": {"rest_s3": "SeaweedFS 4.48 REST catalog, S3A", "hadoop_local_disk": "Hadoop catalog, file://"},
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
