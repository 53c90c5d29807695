"""``make bench``: throughput, overhead, freshness and file layout of kafka-iceberg against baselines.

On a fresh local stack owned by this process (SeaweedFS REST catalog on S3, Apache Kafka, Apicurio
Registry), for every format (flatten, csv, json, text, binary, avro) x size (small, large):

1. generate realistic messages with ~0.5 % bad ones as Kafka-shaped Parquet replay files
   (``benchmarks/datagen.py``; cached under ``benchmarks/.work/data``; Avro's carry the schema id the
   stack's registry gave the bench schema, registered when the stack is up);
2. run the full pipeline (decode, expectations, error routing, commit with its marker) through
   the replay reader (``benchmarks/framework.py``) — append for every dataset, overwrite and upsert
   for flatten small — with the time of each ``BatchProcessor`` stage recorded
   (``benchmarks/stages.py``);
3. on the same files, in the same Spark session, run baseline (a), a hand-written Spark job, and
   baseline (b), pyarrow on one core (``benchmarks/baselines.py``);
   for every append dataset, produce the same messages to the stack's broker and run the framework
   and (a) again with Spark's Kafka source (``benchmarks/broker.py``);
4. measure the local reader's produce-to-visible latency (``benchmarks/latency.py``);
5. write ``docs/benchmarks/results.{json,md}`` and ``throughput.png`` (``benchmarks/report.py``).

Framework and baseline (a) alternate per dataset; a second sweep (order reversed) runs when the
time budget allows, and each figure is the faster of its attempts (all are kept in the JSON).

    python benchmarks/run.py [--small 300000] [--large 100000] [--repeat 2] [--budget-minutes 15]
"""

# ruff: noqa: E402  (the imports below need the repository root on sys.path first)
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # run as a script: import the benchmarks package from the repository root
    sys.path[0] = str(REPO)
    if "PYTHONPATH" not in __import__("os").environ:  # measure this checkout's package, not another install
        sys.path.insert(1, str(REPO / "src"))

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
import zlib
from dataclasses import replace
from typing import Any

from benchmarks import baselines, broker, datagen, framework, latency, measure, report, stages

OUT_DEFAULT = REPO / "docs" / "benchmarks"
WORK_DEFAULT = REPO / "benchmarks" / ".work"
FIXES_FILE = Path(__file__).with_name("fixes.md")
LATENCY_RESERVE_S = 200.0
TWO_DECODERS = ("json", "csv", "flatten")  # measured with both decoders (source.decoder spark and arrow)
WARM_UP_BATCHES = 2  # batches each measurement of a format runs untimed before its first timed run
BOTH_WRITERS = ("append", "overwrite")  # commit modes measured with both writers (write.engine spark and arrow)

OVERHEAD_REASONS = {
    "flatten": (
        "the framework's decode is strict where `from_json` is lenient: every document is parsed to a "
        "map, checked to be exactly one JSON object without duplicate or unknown keys, and each of the 20 "
        "fields converted with `try_cast` and checked; then the expectation is counted, the quarantined "
        "records are joined back to their original bytes and committed to the quarantine table (a second "
        "commit per batch), and the batch's commit carries the idempotency marker (catalog round trips "
        "before and after). Baseline (a) writes bad records as NULL rows"
    ),
    "csv": (
        "the CSV decoder parses every field as text behind a sentinel column (so a wrong column count is "
        "an error, not silent padding) and converts each field strictly; baseline (a) lets `from_csv` "
        "cast and pad"
    ),
    "json": (
        "the document is checked to be exactly one JSON value (parsed inside a sentinel array) and invalid "
        "UTF-8 is refused, where baseline (a) parses once to a map"
    ),
    "text": (
        "every record crosses from the JVM to the writing task in Python, where Arrow's cast to a string "
        "checks the value is UTF-8 before it is written (with `source.decoder: spark`, a lossless round "
        "trip in Spark's plan does it); baseline (a) casts in the JVM without checking. The crossing "
        "alone is about half of a text batch's job"
    ),
    "avro": (
        "the framework keeps what spark-avro's `from_avro` decodes only where fastavro reads the same "
        "bytes the same way (the header's schema id known, `to_avro` of the value giving the bytes back, "
        "dates in Python's range, then text checked as UTF-8 in the writing task); the other records are "
        "decoded by fastavro in Python, record by record, and one that does not decode becomes an error "
        "row, decoded again by Spark's side for its reason. Baseline (a) runs `from_avro` with the one "
        "schema it was given, whatever the id says"
    ),
    "binary": (
        "nothing is decoded, so what remains is the framework's fixed cost per batch: the batch's round "
        "trip through Python to the writing task, the error check and the marker lookups around the commit"
    ),
}

METHOD = [
    "- **Stack**: started by `run.py` and owned by it (`LocalStack(run_dir).up(owned=True)`, a temporary "
    "run directory): SeaweedFS 4.48 (`weed mini`, S3 + Iceberg REST catalog, SigV4-signed), Apache Kafka "
    "4.1 for the latency test, Apicurio Registry 3.0 (the Avro topic's schema). Spark 3.5 `local[2]` from "
    "`kafka_iceberg.session.get_spark` (driver memory "
    "2 GiB, `KAFKA_ICEBERG_DRIVER_MEMORY`), Iceberg 1.10 runtime, tables through the REST catalog with "
    "Iceberg's S3FileIO; format version 2, zstd Parquet.",
    "- **Framework**: a throwaway project per run (`pipelines/p.yml` + the repository's environments and "
    "a `bench` environment = `local.yml` with `reader: replay` and `replay_path`), run in-process with "
    "`kafka_iceberg.run.prepare/open_session/run` exactly like `ingest-<format>`, without the event "
    "log (buffered, one commit per 30 s) and the progress line. Flatten: declared 20-column schema, "
    "`schema_evolution: strict`, expectation `amt >= 0` (quarantine), `errors: {skip_error: true, "
    "quarantine_table: ...}`; other formats `errors: {skip_error: true}`; text and binary `mode: value`. "
    "Overwrite tables are partitioned by `pt`; upsert merges on `uid` (flatten) with `merge-on-read`.",
    "- **Baseline (a)**: a Structured Streaming query over the same replay files (`maxFilesPerTrigger=1`, "
    "so the same micro-batches), `foreachBatch` with `from_json(value, <20-column DDL>)` / "
    "`from_csv(value, <10-column DDL>)` / `from_json(value, 'map<string,string>') IS NOT NULL` (json) / "
    "spark-avro's `from_avro(substring(value, 6), <writer schema>)` PERMISSIVE (avro: the schema id is "
    "not read; the job knows its one schema) / "
    "casts (text, binary), a `pt` literal, and `writeTo(table).append()` (`overwritePartitions()`; "
    "`MERGE INTO` of the newest row per key for upsert) into a table with the same columns and "
    "properties in the same catalog. No error routing, no expectations, no marker.",
    "- **From the broker** (every format, small and large, dirty and clean): the replay files' messages "
    "produced once per run (untimed) to the stack's Kafka, same partitions, keys and timestamps; the "
    "framework runs with `reader: spark` (the `local` environment: Spark's Kafka source), baseline (a) "
    'with `readStream.format("kafka")`; both from the earliest offset, `maxOffsetsPerTrigger` = the '
    "replay file size (the same batches), `availableNow`.",
    "- **Baseline (c)** (json, csv, flatten): baseline (a) with the parse done by pyarrow inside Spark: "
    "`foreachBatch` with `mapInArrow` calling baseline (b)'s parse on each Arrow batch (Spark's default "
    "10,000 records), a `pt` literal, and `writeTo(table).append()`, over the good messages only (as "
    "replay files of the same batch size; pyarrow's readers fail a whole batch on one bad record). Nothing "
    "checked, routed or marked: the ceiling of any Arrow decoder inside Spark feeding Spark's Iceberg "
    "writer. Compared per MB, since it reads 0.5 % fewer messages.",
    "- **Baseline (b)**: a child Python process with `pa.set_cpu_count(1)`, `pa.set_io_thread_count(1)`, "
    "readers with `use_threads=False`: reads the good messages (`good.parquet`, the bad 0.5 % left out: "
    "pyarrow's JSON reader has no per-record error path), parses them per batch (`pyarrow.json.read_json` "
    "with an explicit schema, nested objects as structs / `pyarrow.csv.read_csv` with column types / a "
    "UTF-8-validating cast for text / fastavro's `schemaless_reader` per record into `pa.Table.from_pylist`) "
    "and writes zstd Parquet with the same Kafka columns and `pt` to "
    "local disk. Its figures are per 1 core, over the bytes it parsed.",
    "- **Timing**: wall clock of the whole run (framework: `prepare` to the end of the last batch; "
    "baseline (a): query start to end), after an untimed warm-up (a framework and a baseline run: "
    "append, two batches as large as a small dataset's, then upsert) and, before the first timed runs "
    "of each format and commit mode, each of its measurements once untimed on the dataset's first two "
    "batches (the broker runs excepted), so no measurement pays for compiling a format's code. Framework and "
    "baseline (a) alternate; a second sweep in reverse order runs when the budget allows; the faster "
    "attempt is reported, every attempt is in `results.json`. CPU seconds: "
    "the driver JVM and every process under it, i.e. Spark's Python workers (`/proc/<pid>/stat` of the "
    "process tree, reaped children included) + driver Python (`time.process_time`).",
    "- **Memory**: peak RSS of the driver JVM and Python sampled every 100 ms from `/proc/<pid>/status`; "
    "JVM heap peak = sum of the heap pools' peak usage (`MemoryPoolMXBean`, reset before each run). "
    "Peak RSS of the JVM only grows over the session, so compare heap peaks between runs. Python workers: "
    "the peak of the proportional set sizes of Spark's Python daemon and workers summed (`/proc/<pid>/smaps_rollup`, "
    "the processes under the JVM), and what they held when the run began; read at each scan of the process tree "
    "(every 0.5 s) and at each 100 ms sample whose summed RSS is the highest yet, since reading it costs 1-1.5 ms "
    "a process in the measuring Python.",
    "- **Layout**: files per commit = mean `added-data-files` of the commits that added rows, average file "
    "size from `inspect.files()` (pyiceberg, an independent reader).",
    "- **Profile**: `benchmarks/stages.py` wraps the stages of `kafka_iceberg.run.batch` (decode, expectations, "
    "write rejections, error routing, quarantine append, table plan/apply/schema, marker lookup, commit) "
    "and times them exclusively; each stage runs in its own Spark job group so `statusTracker` counts the "
    "Spark jobs (passes over the data) it started.",
]


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        mem_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal"))
    except OSError:
        mem_kb = 0
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(mem_kb / 2**20),
        "python": platform.python_version(),
        "spark_master": os.environ.get("KAFKA_ICEBERG_SPARK_MASTER", "local[2]"),
    }


def versions() -> dict[str, str]:
    import pyarrow
    import pyiceberg
    import pyspark

    import kafka_iceberg

    return {
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "pyiceberg": pyiceberg.__version__,
        "kafka_iceberg_package": str(Path(kafka_iceberg.__file__).parent),
    }


class Bench:
    """State of one ``make bench`` run."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.started = time.monotonic()
        self.work: Path = args.work
        self.work.mkdir(parents=True, exist_ok=True)
        self.run_work = Path(tempfile.mkdtemp(prefix="run-", dir=self.work))
        self.counter = 0
        self.schema_ids: dict[str, int] = {}  # avro dataset → its schema id in this run's registry
        self.loaded_topics: set[str] = set()  # topics produced to the broker in this run
        self.warmed: set[tuple[str, str]] = set()  # (format, commit mode) whose code paths were warmed up

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log(self, text: str) -> None:
        print(f"[{self.elapsed():6.0f}s] {text}", flush=True)

    def unique(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}_{self.counter}_{int(time.time()) % 100000}"

    # -- one measurement each ----------------------------------------------------------------------
    def framework(
        self,
        ds: datagen.Dataset,
        gen: datagen.Generated,
        mode: str,
        decoder: str = "auto",
        writer: str = "auto",
        from_broker: bool = False,
    ) -> dict[str, Any]:
        name = self.unique(f"fw_{ds.name}_{mode}")
        replay = None if from_broker else Path(gen.files[0]).parent
        path = framework.make_project(self.run_work, ds, replay, name, mode, decoder, writer)
        with measure.Meter(self.spark) as meter, stages.profiled(self.spark) as prof:
            run = framework.run_framework(path)
        out = {**meter.usage.as_dict(), "table": f"{framework.NAMESPACE}.{name}", **run.summary()}
        out["profile"] = prof.as_dict()
        if run.records_in != ds.records:
            raise RuntimeError(f"framework read {run.records_in} of {ds.records} records of {ds.name}")
        return out

    def framework_arrow(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """The framework with ``decoder: arrow``, where ``auto`` (``framework``) is the Spark decoder."""
        return self.framework(ds, gen, mode, decoder="arrow")

    def framework_spark_decoder(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """The framework with ``decoder: spark``, where ``auto`` (``framework``) is the Arrow decoder."""
        return self.framework(ds, gen, mode, decoder="spark")

    def framework_arrow_writer(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """The framework with ``write.engine: arrow`` (Spark decoder, the single pass)."""
        return self.framework(ds, gen, mode, writer="arrow")

    def framework_spark_writer(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """The framework with ``write.engine: spark`` (Spark decoder, step by step)."""
        return self.framework(ds, gen, mode, writer="spark")

    def baseline_a(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        name = self.unique(f"base_{ds.name}_{mode}")
        table = f"lake.{framework.NAMESPACE}.{name}"
        with measure.Meter(self.spark) as meter:
            baselines.spark_baseline(self.spark, ds, Path(gen.files[0]).parent, table, mode, self.run_work / name)
        return {**meter.usage.as_dict(), "table": f"{framework.NAMESPACE}.{name}"}

    def framework_broker(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """The framework reading the messages from the stack's broker with Spark's Kafka source."""
        self._load_topic(ds, gen)
        return self.framework(ds, gen, mode, from_broker=True)

    def baseline_a_broker(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """Baseline (a) reading the same topic with ``readStream.format("kafka")``."""
        self._load_topic(ds, gen)
        name = self.unique(f"base_kafka_{ds.name}_{mode}")
        table = f"lake.{framework.NAMESPACE}.{name}"
        source = broker.kafka_stream(self.spark, self.bootstrap, ds.topic, ds.records_per_file)
        with measure.Meter(self.spark) as meter:
            baselines.spark_baseline(self.spark, ds, Path(gen.files[0]).parent, table, mode, self.run_work / name,
                                     source=source)  # fmt: skip
        return {**meter.usage.as_dict(), "table": f"{framework.NAMESPACE}.{name}"}

    def _load_topic(self, ds: datagen.Dataset, gen: datagen.Generated) -> None:
        if ds.topic not in self.loaded_topics:  # once per run, untimed
            started = time.monotonic()
            sent = broker.load_topic(self.bootstrap, ds, gen)
            self.loaded_topics.add(ds.topic)
            self.log(f"produced {sent:,} messages of {ds.name} to the broker ({time.monotonic() - started:.1f}s)")

    def baseline_c(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """Hand-written pyarrow parse inside Spark (``mapInArrow``) + append, on the good messages."""
        return self._on_good_messages(ds, gen, f"arrow_{ds.name}", baselines.spark_arrow_baseline)

    def baseline_d(self, ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
        """Hand-written pyarrow parse and Parquet write inside Spark tasks, one Java commit per batch."""
        return self._on_good_messages(ds, gen, f"arrow_writer_{ds.name}", baselines.arrow_writer_baseline)

    def _on_good_messages(self, ds: datagen.Dataset, gen: datagen.Generated, stem: str, job: Any) -> dict[str, Any]:
        name = self.unique(stem)
        # Written once per dataset file (untimed); the format warm-up's dataset has the same name.
        replay = self.run_work / f"good-{ds.name}-{zlib.crc32(gen.good_file.encode()):08x}"
        if not replay.exists():
            baselines.good_replay_files(Path(gen.good_file), replay, ds.records_per_file)
        table = f"lake.{framework.NAMESPACE}.{name}"
        with measure.Meter(self.spark) as meter:
            job(self.spark, ds, replay, table, self.run_work / name)
        return {**meter.usage.as_dict(), "table": f"{framework.NAMESPACE}.{name}",
                "records": gen.good_records, "megabytes": gen.good_value_bytes / 1e6}  # fmt: skip

    def baseline_b(self, ds: datagen.Dataset, gen: datagen.Generated) -> dict[str, Any]:
        out_dir = self.run_work / self.unique(f"pyarrow_{ds.name}")
        result = baselines.run_pyarrow_child(ds.fmt, Path(gen.good_file), out_dir, ds.records_per_file)
        shutil.rmtree(out_dir, ignore_errors=True)
        return {
            "wall_seconds": round(result["seconds"], 3),
            "cpu_seconds": round(result["cpu_seconds"], 3),
            "records": result["records"],
            "megabytes": gen.good_value_bytes / 1e6,
            "peak_rss_mb": round(result["peak_rss_mb"], 1),
            "files": result["files"],
            "bytes_written": result["bytes_written"],
        }

    # -- the run -----------------------------------------------------------------------------------
    def datasets(self) -> list[tuple[datagen.Dataset, datagen.Generated]]:
        a = self.args
        out = []
        wanted = [(fmt, size, datagen.BAD_SHARE) for fmt in datagen.FORMATS for size in datagen.SIZES]
        wanted += [(fmt, size, 0.0) for fmt in TWO_DECODERS for size in datagen.SIZES]  # clean topics
        for fmt, size, bad_share in wanted:
            n, per = (a.small, a.per_file_small) if size == "small" else (a.large, a.per_file_large)
            schema_id = self.schema_ids.get(f"{fmt}_{size}", 0)
            ds = datagen.Dataset(fmt, size, n, per, schema_id=schema_id, bad_share=bad_share)
            if a.only and ds.name not in a.only:
                continue
            started = time.monotonic()
            gen = datagen.write_dataset(ds, self.work / "data")
            self.log(f"data {ds.name}: {gen.records:,} records, {gen.avg_bytes:.0f} B avg, "
                     f"{gen.bad_records} bad ({time.monotonic() - started:.1f}s)")  # fmt: skip
            out.append((ds, gen))
        return out

    def start(self) -> None:
        from kafka_iceberg.catalogs import render
        from kafka_iceberg.environment import local_resolver
        from kafka_iceberg.local.profile import LOCAL_CATALOG, local_catalog_profile
        from kafka_iceberg.local.stack import LocalStack
        from kafka_iceberg.session import attach_catalogs, get_spark

        self.stack_dir = Path(tempfile.mkdtemp(prefix="kafka-iceberg-bench-"))
        self.stack = LocalStack(self.stack_dir)
        self.state = self.stack.up(owned=True)
        os.environ["KAFKA_ICEBERG_RUN_DIR"] = str(self.stack_dir)
        self.spark = get_spark(app_name="kafka-iceberg-bench")
        attach_catalogs(self.spark, [render(LOCAL_CATALOG, local_catalog_profile())],
                        local_resolver(stack_dir=self.stack_dir))  # fmt: skip
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{framework.NAMESPACE}")
        from kafka_iceberg.local.readback import pyiceberg_catalog

        self.catalog = pyiceberg_catalog(self.state.describe())
        self.bootstrap = str(self.state.describe()["kafka"]["bootstrap"])
        self.schema_ids = register_avro_schema(self.state.registry_url)
        self.log(f"stack up in {self.state.startup_seconds:.1f}s, Spark session ready")

    def stop(self) -> None:
        try:
            self.stack.down()
        finally:
            shutil.rmtree(self.stack_dir, ignore_errors=True)
            shutil.rmtree(self.run_work, ignore_errors=True)

    def warm_up(self) -> None:
        # Batches as large as a small dataset's: Spark reads each with a task per core, so every
        # core's Python worker starts, and the JVM compiles the hot decode code, here. With
        # 2,000-record batches (one task) the first timed run paid for both: its first
        # 100,000-record batch took 6.5 s against 2.0 s for the next (benchmarks/fixes.md, stop 32).
        upserts = datagen.Dataset("flatten", "small", 4000, 2000, seed=99)
        for ds, mode in ((warm_up_appends(self.args.per_file_small), "append"), (upserts, "upsert")):
            gen = datagen.write_dataset(ds, self.work / f"warmup_{mode}")
            self.framework(ds, gen, mode)
            self.baseline_a(ds, gen, mode)
        self.log("warm-up done (untimed)")

    def warm_up_format(self, ds: datagen.Dataset, mode: str, order: list[str]) -> None:
        """Before the first timed runs of a format and commit mode: each of them once, untimed, on two batches.

        The session warm-up runs one format's path; each other format's decoder, checks and
        writer are JIT-compiled on their first batches. Without this the first measurement of a
        format paid for it: flatten_small's framework run took 16-19 s where the same run repeated
        took 11-13 s, and which measurement went first alternates (benchmarks/fixes.md, stop 43).
        """
        if (ds.fmt, mode) in self.warmed:
            return
        self.warmed.add((ds.fmt, mode))
        started = time.monotonic()
        warm = replace(ds, records=min(ds.records, WARM_UP_BATCHES * ds.records_per_file))
        gen = datagen.write_dataset(warm, self.work / "warmup_format")
        for which in order:
            if not which.endswith("_broker"):  # the broker's topic holds the whole dataset
                getattr(self, which)(warm, gen, mode)
        self.log(f"warm-up of {ds.fmt} {mode} done ({time.monotonic() - started:.0f}s, untimed)")

    def main(self) -> dict[str, Any]:
        load_before = os.getloadavg()
        entries: dict[str, dict[str, Any]] = {}
        self.start()  # first: the Avro messages carry the schema id of this stack's registry
        try:
            data = self.datasets()
            plan: list[tuple[datagen.Dataset, datagen.Generated, str]] = [(ds, gen, "append") for ds, gen in data]
            plan += [(ds, gen, m) for ds, gen in data if ds.name == "flatten_small" for m in ("overwrite", "upsert")]
            self.warm_up()
            budget = self.args.budget_minutes * 60 - (0 if self.args.skip_latency else LATENCY_RESERVE_S)
            sweep_seconds = 0.0
            for rep in range(self.args.repeat):
                if rep and self.elapsed() + sweep_seconds > budget:
                    self.log(f"sweep {rep + 1} skipped: it would end past the {self.args.budget_minutes} min budget")
                    break
                sweep_started = time.monotonic()
                for i, (ds, gen, mode) in enumerate(plan):
                    key = f"{ds.name}:{mode}"
                    entry = entries.setdefault(key, new_entry(ds, gen, mode))
                    order = ["framework", "baseline_a"] if (i + rep) % 2 == 0 else ["baseline_a", "framework"]
                    if mode == "append" and ds.fmt in TWO_DECODERS:
                        order[1:1] = [other_decoder(ds), "baseline_c", "baseline_d"]
                    if mode in BOTH_WRITERS:  # the writer that write.engine auto did not take
                        order.insert(1, other_writer(ds))
                    if mode == "append":  # every append dataset from the broker too (Spark's Kafka source)
                        order += ["framework_broker", "baseline_a_broker"][:: 1 if (i + rep) % 2 == 0 else -1]
                    self.warm_up_format(ds, mode, order)
                    for which in order:
                        result = getattr(self, which)(ds, gen, mode)
                        entry[which].append(result)
                        self.log(f"{key:22s} {which:10s} {result['wall_seconds']:7.2f}s wall "
                                 f"{result['cpu_seconds']:7.2f}s cpu")  # fmt: skip
                    if mode == "append":
                        entry["baseline_b"].append(self.baseline_b(ds, gen))
                        self.log(f"{key:22s} baseline_b {entry['baseline_b'][-1]['wall_seconds']:7.2f}s")
                    if rep == 0:
                        entry["layout"] = {
                            "framework": measure.table_layout(self.catalog, entry["framework"][0]["table"]),
                            "baseline_a": measure.table_layout(self.catalog, entry["baseline_a"][0]["table"]),
                        }
                        arrow_run = "framework_arrow_writer" if entry.get("framework_arrow_writer") else None
                        arrow_run = arrow_run or ("framework" if entry.get("framework_spark_writer") else None)
                        if arrow_run:  # the Arrow writer's run: measured beside auto, or auto itself
                            entry["layout"]["framework_arrow_writer"] = measure.table_layout(
                                self.catalog, entry[arrow_run][0]["table"]
                            )
                sweep_seconds = time.monotonic() - sweep_started
            lat = None
            if not self.args.skip_latency:
                with stages.profiled(self.spark) as prof:
                    lat = latency.measure_latency(self.run_work, self.state.describe(), rate=self.args.latency_rate,
                                                  seconds=self.args.latency_seconds)  # fmt: skip
                lat["profile"] = prof.as_dict()
                self.log(f"latency p50 {lat['visible_p50_s']}s p95 {lat['visible_p95_s']}s")
                # The same stream through the direct reader (local and single-node runs), unprofiled.
                direct = latency.measure_latency(self.run_work, self.state.describe(), rate=self.args.latency_rate,
                                                 seconds=self.args.latency_seconds, reader="direct")  # fmt: skip
                lat["direct_reader"] = {k: v for k, v in direct.items() if k != "method"}
                self.log(f"latency, direct reader, p50 {direct['visible_p50_s']}s p95 {direct['visible_p95_s']}s")
        finally:
            self.stop()
        return self.results(data, entries, lat, load_before)

    def results(
        self,
        data: list[tuple[datagen.Dataset, datagen.Generated]],
        entries: dict[str, dict[str, Any]],
        lat: dict[str, Any] | None,
        load_before: tuple[float, float, float],
    ) -> dict[str, Any]:
        config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(self.args).items()}
        return build_results(
            config=config,
            total_seconds=self.elapsed(),
            data=data,
            entries=entries,
            latency_result=lat,
            load_before=load_before,
            arrow=direct_arrow(),
        )


def register_avro_schema(registry_url: str) -> dict[str, int]:
    """Dataset name → the id ``registry_url`` gave the bench's Avro schema under that topic's subject."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": registry_url})
    schema = Schema(json.dumps(datagen.AVRO_SCHEMA), "AVRO")
    out = {}
    for size in datagen.SIZES:
        ds = datagen.Dataset("avro", size, 0, 1)
        out[ds.name] = client.register_schema(f"{ds.topic}-value", schema)
    return out


def other_writer(ds: datagen.Dataset) -> str:
    """The measurement of the writer that ``write.engine: auto`` does not take for ``ds``."""
    from kafka_iceberg.write.arrow_files import AUTO_ARROW_WRITER

    return "framework_spark_writer" if ds.fmt in AUTO_ARROW_WRITER else "framework_arrow_writer"


def other_decoder(ds: datagen.Dataset) -> str:
    """The measurement of the decoder that ``source.decoder: auto`` does not take for ``ds``.

    Auto takes the Arrow decoder where the Arrow writer writes what it parses (json, whose
    benchmark expectation pyarrow evaluates), Spark's elsewhere.
    """
    from kafka_iceberg.decode.arrow import AUTO_ARROW_WHERE_PARSED

    return "framework_spark_decoder" if ds.fmt in AUTO_ARROW_WHERE_PARSED else "framework_arrow"


def new_entry(ds: datagen.Dataset, gen: datagen.Generated, mode: str) -> dict[str, Any]:
    """An empty record of one dataset x mode, to which each attempt is appended."""
    two = mode == "append" and ds.fmt in TWO_DECODERS
    entry: dict[str, Any] = {other_decoder(ds): [], "baseline_c": [], "baseline_d": []} if two else {}
    if mode in BOTH_WRITERS:
        entry[other_writer(ds)] = []
    if mode == "append":  # measured from the broker too
        entry |= {"framework_broker": [], "baseline_a_broker": []}
    return entry | {
        "dataset": ds.name,
        "format": ds.fmt,
        "size": ds.size,
        "mode": mode,
        "records": gen.records,
        "megabytes": gen.value_bytes / 1e6,
        "avg_bytes": gen.avg_bytes,
        "framework": [],
        "baseline_a": [],
        "baseline_b": [],
    }


def build_results(
    *,
    config: dict[str, Any],
    total_seconds: float,
    data: list[tuple[datagen.Dataset, datagen.Generated]],
    entries: dict[str, dict[str, Any]],
    latency_result: dict[str, Any] | None,
    load_before: tuple[float, float, float],
    arrow: dict[str, Any] | None,
) -> dict[str, Any]:
    """The ``results.json`` document from the raw attempts (pure apart from reading the machine)."""
    from kafka_iceberg.decode.arrow import AUTO_ARROW_WHERE_PARSED

    runs = []
    for entry in entries.values():
        if not entry.get("baseline_b"):
            entry.pop("baseline_b", None)
        entry["summary"] = report.summarize(entry)
        runs.append(entry)
    slowest = next((r for r in runs if r["dataset"] == "flatten_small" and r["mode"] == "append"), None)
    slowest = slowest or max(runs, key=lambda r: r["summary"]["framework"]["wall_seconds"])
    fastest_fw = min(slowest["framework"], key=lambda a: a["wall_seconds"])
    notes = {}
    for run in runs:
        top = run["summary"]["framework"]["profile"]["stages"][:3]
        shares = ", ".join(f"{s['stage']} {s['share']:.0%}" for s in top if s["share"])
        notes[f"{run['dataset']}:{run['mode']}"] = f"largest stages: {shares}"
    m = machine()
    m["load_before"] = [round(x, 2) for x in load_before]
    m["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "meta": {
            "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "total_seconds": round(total_seconds, 1),
            "machine": m,
            "versions": versions(),
            "config": config,
            "auto_arrow_decoder": sorted(AUTO_ARROW_WHERE_PARSED),  # what ``decoder: auto`` took when measured
        },
        "datasets": {
            ds.name: {
                "format": ds.fmt,
                "size": ds.size,
                "records": gen.records,
                "records_per_file": ds.records_per_file,
                "files": len(gen.files),
                "avg_bytes": round(gen.avg_bytes, 1),
                "megabytes": round(gen.value_bytes / 1e6, 2),
                "bad_records": gen.bad_records,
                "violations": gen.violations,
            }
            for ds, gen in data
        },
        "runs": runs,
        "profile": {"run": f"{slowest['dataset']} {slowest['mode']}", "profile": fastest_fw["profile"]},
        "latency": latency_result,
        "direct_arrow": arrow,
        "overhead_notes": notes,
        "overhead_reasons": OVERHEAD_REASONS,
        "fixes": FIXES_FILE.read_text().splitlines() if FIXES_FILE.exists() else [],
        "method": METHOD,
    }


def direct_arrow(records: int = 100_000, value_bytes: int = 250) -> dict[str, Any]:
    """Time of the direct reader's message → Arrow conversion on in-memory messages (best of 3)."""
    from confluent_kafka import Message

    from kafka_iceberg.source.direct import to_arrow

    value = b"x" * value_bytes
    msgs = [
        Message(topic="t", partition=i % 4, offset=i, key=b"%d" % i, value=value, timestamp=(1, 1_700_000_000_000))
        for i in range(records)
    ]
    seconds = min(_timed(lambda: to_arrow(msgs)) for _ in range(3))
    per_record = seconds / records * 1e6
    return {"records": records, "value_bytes": value_bytes, "seconds": seconds, "us_per_record": per_record}


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def warm_up_appends(per_file: int) -> datagen.Dataset:
    """The warm-up's append topic: two batches of ``per_file`` flatten records (untimed)."""
    return datagen.Dataset("flatten", "small", 2 * per_file, per_file, seed=99)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--small", type=int, default=300_000, help="records per small dataset")
    p.add_argument("--large", type=int, default=100_000, help="records per large dataset")
    p.add_argument("--per-file-small", type=int, default=100_000, help="records per replay file (micro-batch), small")
    p.add_argument("--per-file-large", type=int, default=50_000, help="records per replay file (micro-batch), large")
    p.add_argument("--repeat", type=int, default=2, help="sweeps over all datasets (budget permitting)")
    p.add_argument("--budget-minutes", type=float, default=15.0, help="no new sweep starts that would end later")
    p.add_argument("--latency-rate", type=float, default=200.0)
    p.add_argument("--latency-seconds", type=float, default=30.0)
    p.add_argument("--skip-latency", action="store_true")
    p.add_argument("--only", nargs="*", default=None, help="dataset names (e.g. flatten_small csv_large)")
    p.add_argument("--work", type=Path, default=WORK_DEFAULT, help="generated data (kept) and scratch")
    p.add_argument("--out", type=Path, default=OUT_DEFAULT)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    bench = Bench(args)
    results = bench.main()
    for path in report.write_all(results, args.out):
        bench.log(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    print(json.dumps({r["dataset"] + ":" + r["mode"]: r["summary"]["ratios"] for r in results["runs"]}, indent=1))


if __name__ == "__main__":
    main()
