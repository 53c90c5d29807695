"""Decode throughput: 1M Kafka-shaped records per format, Spark decoder against a bare-parse baseline.

Run from the repository root::

    python benchmarks/decode_bench.py [--records 1000000] [--repeat 2]

Each format's input is generated with Spark SQL, cached and counted first, so only decoding is
timed. "decode" forces both outputs (``rows`` and ``errors``, each written to the ``noop`` sink:
two passes over the batch, as a runner that does not cache would do); "baseline" is the bare
parse a hand-written job would do (``from_json``/``from_csv`` into the same schema, or a cast),
with no error detection. About 1% of the records are bad, so error rows are exercised too.
Figures are the best of ``--repeat`` runs, as records per wall second and per CPU second of the
Spark JVM (steadier on a shared machine), and go to ``benchmarks/results/decode.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("KAFKA_ICEBERG_DRIVER_MEMORY", "4g")

from kafka_iceberg.decode import decode  # noqa: E402
from kafka_iceberg.session import get_spark  # noqa: E402
from kafka_iceberg.spec.model import TableSpec  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "decode.json"
FLUSH = datetime(2024, 1, 1, tzinfo=timezone.utc)
BAD_EVERY = 100  # one bad record in a hundred

CSV_COLUMNS = {
    "id": "long",
    "name": "string",
    "price": "double",
    "qty": "int",
    "active": "boolean",
    "day": "date",
    "amount": "decimal(12,2)",
    "city": "string",
    "code": "string",
    "score": "double",
}
FLATTEN_COLUMNS = {
    "id": "long",
    "name": "string",
    "price": "double",
    "qty": "long",
    "active": "boolean",
    "city": "string",
    "code": "string",
    "score": "double",
    "created": "timestamp",
    "attrs": "string",
    **{f"s{i}": "string" for i in range(5)},
    **{f"n{i}": "long" for i in range(5)},
}
JSON_BASELINE_SCHEMA = "id BIGINT, name STRING, region STRING, n BIGINT"


def _spec(fmt: str, **keys: Any) -> TableSpec:
    return TableSpec.model_validate(
        {"name": "b", "namespace": "bench", "source": {"topics": ["b"], "format": fmt}, **keys}
    )


def _value_sql(fmt: str) -> str:
    """SQL over ``id`` (from spark.range) producing the message value; every BAD_EVERY-th is bad."""
    bad = f"id % {BAD_EVERY} = 7"
    text = "CAST(concat('message number ', id, ' with some ordinary text in it') AS BINARY)"
    if fmt == "binary":
        return text
    if fmt == "text":
        return f"CASE WHEN {bad} THEN concat({text}, X'C328') ELSE {text} END"  # invalid UTF-8
    if fmt == "json":
        return (
            f"CASE WHEN {bad} THEN concat('{{\"id\":', id, ',') "
            'ELSE format_string(\'{"id":%d,"name":"user-%d","region":"eu-west","n":%d}\', id, id, id % 97) END'
        )
    if fmt == "csv":
        good = (
            "concat_ws(',', id, concat('name ', id), id / 7.0, id % 1000, id % 2 = 0, "
            "date_add(DATE'2024-01-01', CAST(id % 365 AS INT)), round(id / 3.0, 2), 'Paris', "
            "concat('\"c,', id % 13, '\"'), (id % 1000) / 10.0)"
        )
        return f"CASE WHEN {bad} THEN concat('x', id, ',too,few') ELSE {good} END"
    if fmt == "flatten":
        parts = [
            "'\"id\":', id",
            "',\"name\":\"user-', id, '\"'",
            "',\"price\":', id / 7.0",
            f"',\"qty\":', CASE WHEN {bad} THEN '\"many\"' ELSE id % 1000 END",
            "',\"active\":', CASE WHEN id % 2 = 0 THEN 'true' ELSE 'false' END",
            '\',"city":"Paris","code":"c\', id % 13, \'"\'',
            "',\"score\":', (id % 1000) / 10.0",
            '\',"created":"2024-01-01T00:00:00Z"\'',
            '\',"attrs":{"region":"beijing","tags":["a","b"],"level":\', id % 5, \'}\'',
            *[f"',\"s{i}\":\"v{i}-', id % 50, '\"'" for i in range(5)],
            *[f"',\"n{i}\":', id % {i + 2}" for i in range(5)],
        ]
        return "concat('{', " + ", ".join(parts) + ", '}')"
    raise ValueError(fmt)


def _input(spark: Any, fmt: str, n: int) -> Any:
    from pyspark import StorageLevel

    df = spark.range(n).selectExpr(
        "CAST(concat('key-', id % 1000) AS BINARY) AS key",
        f"CAST({_value_sql(fmt)} AS BINARY) AS value",
        "'bench' AS topic",
        "CAST(id % 4 AS INT) AS partition",
        "id AS offset",
        "TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id / 1000) AS timestamp",
        "CAST(NULL AS ARRAY<STRUCT<key: STRING, value: BINARY>>) AS headers",
    )
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    df.count()
    return df


def _baseline(df: Any, fmt: str) -> Any:
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    if fmt == "binary":
        return df.select("topic", "partition", "offset", "timestamp", "key", "value")
    if fmt == "text":
        return df.select("topic", "partition", "offset", "timestamp", F.col("key").cast("string"), text)
    if fmt == "json":  # parsing is the least a job checking JSON does
        return df.select(
            "topic", "partition", "offset", "timestamp", F.from_json(text, JSON_BASELINE_SCHEMA).alias("r")
        )
    if fmt == "csv":
        schema = ", ".join(f"{n} {t.upper().replace('LONG', 'BIGINT')}" for n, t in CSV_COLUMNS.items())
        return df.select("topic", "partition", "offset", "timestamp", F.from_csv(text, schema).alias("r")).select(
            "topic", "partition", "offset", "timestamp", "r.*"
        )
    schema = ", ".join(f"{n} {t.upper().replace('LONG', 'BIGINT')}" for n, t in FLATTEN_COLUMNS.items())
    return df.select("topic", "partition", "offset", "timestamp", F.from_json(text, schema).alias("r")).select(
        "topic", "partition", "offset", "timestamp", "r.*"
    )


def _noop(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


class _JvmCpu:
    """CPU seconds used by the local Spark JVM (all threads), read from /proc.

    The machine is shared: wall time moves with other people's load, CPU time much less.
    """

    def __init__(self, spark: Any) -> None:
        self.stat = Path(f"/proc/{spark.sparkContext._gateway.proc.pid}/stat")
        self.tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        fields = self.stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.tick


def _best(repeat: int, action: Any, cpu: _JvmCpu) -> tuple[float, float]:
    """Best wall seconds and best CPU seconds over ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        started, used = time.perf_counter(), cpu()
        action()
        walls.append(time.perf_counter() - started)
        cpus.append(cpu() - used)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spark = get_spark(app_name="decode-bench")
    cpu = _JvmCpu(spark)
    n = args.records
    cases = [
        ("text", _spec("text")),
        ("binary", _spec("binary")),
        ("json", _spec("json")),
        ("csv", _spec("csv", schema={"columns": CSV_COLUMNS})),
        ("flatten", _spec("flatten", schema={"columns": FLATTEN_COLUMNS}, schema_evolution="strict")),
        ("flatten_add_columns", _spec("flatten", schema={"columns": FLATTEN_COLUMNS})),
    ]
    results: dict[str, Any] = {}
    for name, spec in cases:
        fmt = spec.source.format
        df = _input(spark, fmt, n)
        baseline, baseline_cpu = _best(args.repeat, lambda df=df, fmt=fmt: _noop(_baseline(df, fmt)), cpu)

        def run_decode(df: Any = df, spec: TableSpec = spec) -> None:
            decoded = decode(df, spec, flush_time=FLUSH)
            _noop(decoded.rows)
            _noop(decoded.errors)

        decoded_time, decoded_cpu = _best(args.repeat, run_decode, cpu)
        check = decode(df, spec, flush_time=FLUSH)
        rows, errors = check.rows.count(), check.errors.count()
        df.unpersist()
        results[name] = {
            "records": n,
            "rows": rows,
            "errors": errors,
            "baseline_seconds": round(baseline, 3),
            "decode_seconds": round(decoded_time, 3),
            "baseline_records_per_s": round(n / baseline),
            "decode_records_per_s": round(n / decoded_time),
            "decode_over_baseline": round(decoded_time / baseline, 2),
            "baseline_cpu_seconds": round(baseline_cpu, 2),
            "decode_cpu_seconds": round(decoded_cpu, 2),
            "baseline_records_per_cpu_s": round(n / baseline_cpu),
            "decode_records_per_cpu_s": round(n / decoded_cpu),
            "decode_over_baseline_cpu": round(decoded_cpu / baseline_cpu, 2),
        }
        r = results[name]
        print(
            f"{name:20s} decode {r['decode_records_per_s']:>10,}/s  baseline {r['baseline_records_per_s']:>10,}/s  "
            f"x{r['decode_over_baseline']:<5} | per CPU-s: decode {r['decode_records_per_cpu_s']:>10,}  "
            f"baseline {r['baseline_records_per_cpu_s']:>10,}  x{r['decode_over_baseline_cpu']:<5} | "
            f"rows {rows:,} errors {errors:,}",
            flush=True,
        )
    out = {
        "benchmark": "decode",
        "decoder": "spark",
        "arrow": "not built",
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "spark_master": spark.sparkContext.master,
        },
        "method": (
            f"best of {args.repeat} runs; decode = rows and errors each written to noop (two passes); "
            "baseline = bare from_json/from_csv/cast to the same columns, one pass; "
            "per CPU-s = records / CPU seconds of the Spark JVM (the machine is shared)"
        ),
        "formats": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
