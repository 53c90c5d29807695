"""The benchmark harness cannot rot silently: its generators, pyarrow parsers and report writer run
here on a tiny input, in seconds, without Spark or the local stack."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import time

import pyarrow.parquet as pq
import pytest
from benchmarks import baselines, datagen, framework, latency, measure, report, run, stages  # noqa: F401

TINY = 400


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench-data")
    out = {}
    for fmt in datagen.FORMATS:
        for size in datagen.SIZES:
            ds = datagen.Dataset(fmt, size, TINY, 150)
            out[ds.name] = (ds, datagen.write_dataset(ds, root))
    return out


def test_a_clean_topic_is_the_same_messages_with_none_bad(generated, tmp_path):
    ds, gen = generated["flatten_small"]
    clean_ds = datagen.Dataset("flatten", "small", TINY, 150, bad_share=0.0)
    clean = datagen.write_dataset(clean_ds, tmp_path)
    assert clean_ds.name == "flatten_small_clean" and clean_ds.topic != ds.topic
    assert gen.bad_records + gen.violations > 0 and clean.bad_records == clean.violations == 0
    assert clean.good_records == clean.records == gen.records
    good = set(pq.read_table(gen.good_file).column("value").to_pylist())  # the dirty topic's decodable messages
    # ... are the clean topic's, except those the dirty one made violate the expectation
    assert len(good - set(pq.read_table(clean.good_file).column("value").to_pylist())) == gen.violations


def test_replay_files_have_the_kafka_shape_and_the_announced_sizes(generated):
    from kafka_iceberg.source.direct import arrow_schema

    for name, (ds, gen) in generated.items():
        assert len(gen.files) == ds.files == 3, name
        tables = [pq.read_table(f) for f in gen.files]
        assert all(t.schema.equals(arrow_schema()) for t in tables), name
        assert sum(t.num_rows for t in tables) == gen.records == TINY
        assert tables[0].column("topic").to_pylist() == [ds.topic] * ds.records_per_file
        good = pq.read_table(gen.good_file)
        assert good.num_rows == gen.good_records == TINY - gen.bad_records
        expected = {"avro": (80, 960)}.get(ds.fmt, (200, 1200))[ds.size == "large"]  # Avro is compact
        assert 0.7 * expected < gen.avg_bytes < 1.5 * expected, (name, gen.avg_bytes)


def test_each_partition_counts_its_own_offsets(generated):
    _ds, gen = generated["json_small"]
    rows = [r for f in gen.files for r in pq.read_table(f, columns=["partition", "offset"]).to_pylist()]
    for p in range(datagen.PARTITIONS):
        offsets = [r["offset"] for r in rows if r["partition"] == p]
        assert offsets == list(range(len(offsets)))


def test_bad_records_are_bad_in_the_way_the_format_can_tell():
    rng = random.Random(3)
    kinds = {fmt: [datagen.GENERATORS[fmt](rng, i, False) for i in range(3000)] for fmt in datagen.FORMATS}
    for fmt in ("flatten", "json", "csv", "text", "avro"):
        bad = [v for v, kind in kinds[fmt] if kind == "bad"]
        assert 0.001 * 3000 < len(bad) < 0.02 * 3000, fmt
    assert not [v for v, kind in kinds["binary"] if kind == "bad"]
    for value, kind in kinds["flatten"]:
        if kind == "good":
            assert set(json.loads(value)) == set(datagen.FLATTEN_COLUMNS)
    for value, kind in kinds["text"]:
        if kind == "bad":
            with pytest.raises(UnicodeDecodeError):
                value.decode()


def test_avro_messages_are_what_the_framework_decodes_and_refuses():
    from kafka_iceberg.decode.avro import parse, read

    schema = parse(json.dumps(datagen.AVRO_SCHEMA))
    rng = random.Random(5)
    reasons = []
    for i in range(2000):
        value, kind = datagen.avro_message(rng, i, i % 2 == 1, schema_id=7)
        if kind == "good":
            assert value[:5] == b"\x00\x00\x00\x00\x07"
            assert read(value[5:], schema)["id"] == i
        elif value[:1] != b"\x00":
            reasons.append("magic")
        else:
            with pytest.raises(ValueError):
                read(value[5:], schema)
            reasons.append("short")
    assert set(reasons) == {"magic", "short"}


def test_pyarrow_parses_every_format_of_the_good_records(generated):
    for name, (ds, gen) in generated.items():
        batch = pq.read_table(gen.good_file)
        columns = baselines.pyarrow_parse(ds.fmt, batch)
        assert set(columns) == set(baselines.payload_columns(ds.fmt)), name
        assert all(len(c) == batch.num_rows for c in columns.values()), name


def test_table_specs_validate():
    from kafka_iceberg.spec.model import TableSpec

    for fmt in datagen.FORMATS:
        ds = datagen.Dataset(fmt, "small", 10, 10)
        for mode in ("append", "overwrite", "upsert"):
            TableSpec.model_validate(framework.table_spec(ds, f"t_{fmt}", mode))


def test_report_writes_json_markdown_and_chart(generated, tmp_path):
    def attempt(wall, cpu, **extra):
        return {"wall_seconds": wall, "cpu_seconds": cpu, "jvm_peak_rss_mb": 900.0, "jvm_peak_heap_mb": 400.0,
                "python_workers_peak_mb": 0.0, "python_workers_start_mb": 0.0, **extra}  # fmt: skip

    profile = {
        "batches": 2,
        "batch_seconds_total": 3.0,
        "stages": [{"stage": "expectations", "seconds": 2.0, "share": 0.67, "calls": 2, "spark_jobs": 2}],
    }
    entries = {}
    data = [generated["flatten_small"], generated["binary_large"], generated["json_small"]]
    for ds, gen in data:
        entry = run.new_entry(ds, gen, "append")
        entry["framework"] = [attempt(4.0, 7.0, profile=profile), attempt(3.0, 6.0, profile=profile)]
        entry["baseline_a"] = [attempt(2.0, 3.0)]
        if ds.fmt == "flatten":  # measured with both decoders (auto: Arrow's), and baselines (c) and (d)
            entry["framework_spark_decoder"] = [attempt(6.0, 9.0)]
            good_mb = entry["megabytes"] * 0.99
            entry["baseline_c"] = [attempt(1.5, 2.0, records=gen.good_records, megabytes=good_mb)]
            entry["baseline_d"] = [attempt(1.0, 1.5, records=gen.good_records, megabytes=good_mb)]
            entry["framework_spark_writer"] = [attempt(5.0, 8.0, jvm_peak_heap_mb=900.0, python_workers_peak_mb=100.0)]
            # auto took the Arrow writer for flatten; memory is the largest attempt's, not the fastest one's
            entry["framework"][0] |= {"jvm_peak_heap_mb": 300.0, "python_workers_peak_mb": 600.0,
                                      "python_workers_start_mb": 450.0}  # fmt: skip
            entry["framework_broker"] = [attempt(4.0, 8.0)]  # the same messages through Spark's Kafka source
            entry["baseline_a_broker"] = [attempt(2.5, 2.0)]
        elif "framework_spark_decoder" in entry:  # json: auto took the Arrow decoder; Spark's measured beside it
            entry["framework_spark_decoder"] = [attempt(5.0, 8.0)]
            entry["framework_spark_writer"] = [attempt(6.0, 9.0)]
        entry["baseline_b"] = [attempt(1.0, 0.9, records=gen.good_records, megabytes=0.1, peak_rss_mb=200.0)]
        entry["layout"] = {"framework": {"files_per_commit": 1.0, "avg_file_mb": 0.2}, "baseline_a": {}}
        entries[f"{ds.name}:append"] = entry
    lat = {
        "method": "m", "trigger": "1 second", "rate_records_per_s": 10, "produce_seconds": 1, "records_measured": 10,
        "batches": 2, "avg_batch_records": 5, "avg_batch_seconds": 1.0, "visible_p50_s": 1.0, "visible_p95_s": 2.0,
        "visible_max_s": 2.5, "snapshot_p50_s": 0.9, "snapshot_p95_s": 1.9, "profile": profile,
        "direct_reader": {"records_measured": 10, "batches": 4, "avg_batch_records": 2.5, "avg_batch_seconds": 0.5,
                          "visible_p50_s": 0.7, "visible_p95_s": 1.1, "visible_max_s": 1.2},
    }  # fmt: skip
    results = run.build_results(
        config={"small": TINY, "repeat": 2, "budget_minutes": 50.0},
        total_seconds=12.0,
        data=data,
        entries=entries,
        latency_result=lat,
        load_before=(1.0, 1.0, 1.0),
        arrow=run.direct_arrow(records=1000),
    )
    paths = report.write_all(results, tmp_path)
    assert [p.name for p in paths] == ["results.json", "results.md", "throughput.png"]
    back = json.loads(paths[0].read_text())
    ratios = back["runs"][0]["summary"]["ratios"]
    assert ratios["vs_a_wall"] == pytest.approx(2.0 / 3.0, abs=1e-3)  # the faster framework attempt counts
    assert ratios["overhead_vs_a_wall"] == pytest.approx(0.5, abs=1e-3)
    assert ratios["arrow_decoder_vs_a_wall"] == pytest.approx(2.0 / 3.0, abs=1e-3)  # auto: the Arrow decoder
    assert ratios["arrow_vs_spark_decoder_wall"] == pytest.approx(6.0 / 3.0, abs=1e-3)
    # (c) is compared per MB (it reads the good messages only): 0.99 MB in 1.5 s against 1 MB in 2 s
    assert ratios["c_vs_a_wall"] == pytest.approx(0.99 * 2.0 / 1.5, rel=0.02)  # rates are rounded
    assert ratios["arrow_decoder_vs_c_wall"] == pytest.approx((1 / 3.0) / (0.99 / 1.5), rel=0.02)
    # (d) per MB too; the framework (auto: the Arrow writer, 3 s) against Spark's writer (5 s) and (d)
    assert ratios["d_vs_a_wall"] == pytest.approx(0.99 * 2.0 / 1.0, rel=0.02)
    assert ratios["framework_vs_d_wall"] == pytest.approx((1 / 3.0) / (0.99 / 1.0), rel=0.02)
    assert ratios["arrow_vs_spark_writer_wall"] == pytest.approx(5.0 / 3.0, abs=1e-3)
    assert ratios["spark_writer_vs_a_wall"] == pytest.approx(2.0 / 5.0, abs=1e-3)
    assert "framework_arrow" not in back["runs"][1]["summary"]  # binary has one decoder
    json_ratios = back["runs"][2]["summary"]["ratios"]  # auto (3 s) is the Arrow decoder, Spark's took 5 s
    assert json_ratios["arrow_vs_spark_decoder_wall"] == pytest.approx(5.0 / 3.0, abs=1e-3)
    assert json_ratios["spark_decoder_vs_a_wall"] == pytest.approx(2.0 / 5.0, abs=1e-3)
    # From the broker: (a) from Kafka took 2.5 s, the framework from Kafka 4 s, from the replay files 3 s
    assert ratios["broker_vs_a_wall"] == pytest.approx(2.5 / 4.0, abs=1e-3)
    assert ratios["broker_vs_replay_wall"] == pytest.approx(3.0 / 4.0, abs=1e-3)
    assert ratios["a_broker_vs_replay_wall"] == pytest.approx(2.0 / 2.5, abs=1e-3)
    assert "framework_broker" not in back["runs"][1]["summary"]  # binary is measured from replay files only
    text = paths[1].read_text()
    # how it was run: the framework was measured twice (two sweeps), the faster attempt reported
    assert "by `benchmarks/run.py --repeat 2 --budget-minutes 50` (2 sweeps, the faster attempt" in text
    assert "## Decoders: Spark" in text and "| flatten_small | " in text.split("## Decoders")[1]
    assert "| json_small | " in text.split("## Decoders")[1]
    assert "`source.decoder: auto` is one of the two: Arrow for csv, flatten, json," in text  # as measured
    assert "| flatten_small | " in text.split("## Clean topics")[1].split("## From the broker")[0]
    assert "| flatten_small | 50 | 0.62 | 0.25 | 0.67 | 0.75 | 0.80 |" in text.split("## From the broker")[1]
    assert "| flatten_small | append |" in text and "p50 1.00 s, p95 2.00 s" in text
    freshness = text.split("## Freshness")[1]
    assert "Spark's Kafka source (`kafka.reader: spark`)" in freshness
    assert "direct reader (`kafka.reader: direct`" in freshness and "**p50 0.70 s, p95 1.10 s**" in freshness
    # heap (a), Spark's writer, Arrow's (both attempts: 300 and 400); their Python workers' peak (growth in the
    # run: 600 - 450 in one attempt, 0 in the other); Arrow ÷ Spark (400 + 600) ÷ (900 + 100)
    memory = text.split("## Memory")[1]
    assert "| flatten_small | 400 | 900 | 400 | 0 (+0) | 100 (+100) | 600 (+150) | 1.00 |" in memory
    assert "(above 15 %)" in text and "Published anchors" in text
    assert paths[2].read_bytes()[:4] == b"\x89PNG"


def test_cpu_counts_the_processes_under_the_measured_one_even_once_they_ended():
    """Spark's Python workers (mapInArrow) run under the JVM, and its daemon ignores SIGCHLD: the CPU
    of a worker that ended never reaches its parent's counters, yet must count."""
    import subprocess
    import sys

    burner = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
    burner += "print('done', flush=True)\ntime.sleep(0.5)"  # ends soon after: only its last scan knows it
    parent = (
        "import signal, subprocess, sys, time\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        f"print('ready', flush=True)\nsys.stdin.readline()\nsubprocess.Popen([sys.executable, '-c', {burner!r}])\n"
        "time.sleep(60)"
    )
    root = subprocess.Popen([sys.executable, "-c", parent], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdin is not None and root.stdout is not None
        assert root.stdout.readline().strip() == "ready"
        tree = measure.ProcessTree(root.pid)
        root.stdin.write("go\n")
        root.stdin.flush()
        assert root.stdout.readline().strip() == "done"
        tree.scan()  # the burner, alive, with its CPU spent
        time.sleep(1.5)  # it ends and the kernel reaps it: its parent never counts it
        assert len(tree.seen) == 2 and tree.spent() >= 0.5
    finally:
        root.kill()
        root.wait()


def test_the_python_workers_memory_counts_what_a_forked_worker_shares_with_its_daemon_once():
    """Spark's Python daemon forks its workers: their sum of RSS would count the daemon's pages once
    per worker, where the machine holds them once (the Arrow writer's batches are in the workers)."""
    import os
    import signal
    import subprocess
    import sys

    mb = 1 << 20
    worker = f"own = b'w' * (60 * {mb})\nprint('ready', flush=True)\ntime.sleep(60)"
    daemon = (
        f"import os, time\nshared = b'd' * (120 * {mb})\n"
        f"if os.fork() == 0:\n" + "".join(f"    {line}\n" for line in worker.splitlines()) + "time.sleep(60)"
    )
    root = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {daemon!r}])\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert root.stdout is not None and root.stdout.readline().strip() == "ready"
        tree = measure.ProcessTree(root.pid)
        rss = sum(measure.rss_mb(pid) for pid in tree.under)
        assert len(tree.under) == 2  # the daemon and its worker; the root's own memory is not theirs
        assert rss > 300  # the daemon's 120 MB counted in both
        assert 170 <= tree.memory_mb() < 240  # 120 + 60 MB, and two small interpreters
    finally:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()


def test_the_workers_pss_is_read_at_each_tree_scan_and_while_their_memory_grows():
    """Reading PSS costs 1-1.5 ms a process, paid in the measured Python's CPU: a 100 ms tick reads it
    only when the workers' summed RSS is the highest yet; the scans every 0.5 s read it regardless."""

    @dataclasses.dataclass
    class Tree:
        rss: list[float]
        pss: list[float]
        pss_reads: int = 0

        def rss_mb(self) -> float:
            return self.rss.pop(0)

        def memory_mb(self) -> float:
            self.pss_reads += 1
            return self.pss.pop(0)

    meter = measure.Meter(spark=None)
    meter._pid = os.getpid()
    # Ticks: growing (read), growing (read), shrinking (skipped), a scan (read), flat (skipped).
    meter._tree = tree = Tree(rss=[100, 150, 120, 120, 130], pss=[60, 90, 95])  # type: ignore[assignment]
    for scanned in (False, False, False, True, False):
        meter._take(workers_pss=scanned)
    assert tree.pss_reads == 3 and not tree.pss
    assert meter.usage.python_workers_peak_mb == 95 and meter.usage.samples == 5


def test_the_warm_up_gives_every_core_records_to_decode_and_write(spark, tmp_path):
    # A warm-up batch read by a single task left the second core's Python worker, and the JVM's
    # compiled decode, to the first timed run (benchmarks/fixes.md, stop 32).
    from pyspark.sql import functions as F

    from kafka_iceberg.records import KAFKA_SCHEMA_DDL

    ds = run.warm_up_appends(run.parse_args([]).per_file_small)
    gen = datagen.write_dataset(ds, tmp_path)
    assert len(gen.files) == 2
    for path in gen.files:
        frame = spark.read.schema(KAFKA_SCHEMA_DDL).parquet(path)
        counts = [r["count"] for r in frame.groupBy(F.spark_partition_id()).count().collect()]
        assert sum(counts) == ds.records_per_file
        assert len(counts) >= report.SPARK_CORES, counts  # non-empty tasks


def test_each_format_and_mode_is_warmed_up_once_on_its_first_batches_by_each_measurement(tmp_path, monkeypatch):
    # The first timed run of a format paid for compiling its code: flatten_small's framework run
    # took 16-19 s where the same run repeated took 11-13 s (benchmarks/fixes.md, stop 43).
    bench = run.Bench(run.parse_args(["--work", str(tmp_path)]))
    calls = []
    order = ["framework", "framework_spark_writer", "baseline_a", "framework_broker", "baseline_a_broker"]
    for which in order:
        monkeypatch.setattr(bench, which, lambda ds, gen, mode, which=which: calls.append((which, ds, gen, mode)))
    ds = datagen.Dataset("json", "small", 600, 150)
    full = datagen.write_dataset(ds, tmp_path / "data")

    bench.warm_up_format(ds, "append", order)
    bench.warm_up_format(datagen.Dataset("json", "large", 600, 150, bad_share=0.0), "append", order)  # json: done
    bench.warm_up_format(ds, "upsert", ["baseline_a", "framework"])

    assert [(which, mode) for which, _, _, mode in calls] == [
        ("framework", "append"), ("framework_spark_writer", "append"), ("baseline_a", "append"),
        ("baseline_a", "upsert"), ("framework", "upsert"),
    ]  # fmt: skip
    _, warm, gen, _ = calls[0]
    assert (warm.name, warm.records, len(gen.files)) == ("json_small", run.WARM_UP_BATCHES * 150, run.WARM_UP_BATCHES)
    assert gen.good_file != full.good_file  # the baselines' good messages are kept per file, not per name
    for warm_file, full_file in zip(gen.files, full.files, strict=False):  # the dataset's first batches
        assert pq.read_table(warm_file).equals(pq.read_table(full_file))


def test_append_and_overwrite_are_measured_with_both_writers(generated):
    # auto takes the Arrow writer for flatten appends and overwrites (stop 43); upsert keeps Spark's MERGE.
    ds, gen = generated["flatten_small"]
    assert run.other_writer(ds) == "framework_spark_writer"
    assert "framework_spark_writer" in run.new_entry(ds, gen, "append")
    assert "framework_spark_writer" in run.new_entry(ds, gen, "overwrite")
    assert not {"framework_spark_writer", "framework_arrow_writer"} & set(run.new_entry(ds, gen, "upsert"))


def test_the_dictionary_bench_writes_each_dataset_both_ways_and_records_the_ratios(tmp_path, monkeypatch):
    import sys

    from benchmarks import parquet_dictionaries

    from kafka_iceberg.write import dictionaries

    dictionaries.install()  # as any earlier write in this process would have
    out = tmp_path / "dictionaries.json"
    monkeypatch.setattr(sys, "argv", ["parquet_dictionaries.py", "--rows", "400", "--repeat", "1", "--out", str(out)])
    parquet_dictionaries.main()
    results = json.loads(out.read_text())["results"]
    assert [r["dataset"] for r in results] == [f"{f}_{s}" for f, s in parquet_dictionaries.DATASETS]
    for r in results:
        assert r["rows"] == 400 and set(r["bytes"]) == {"default", "chosen"} and r["cpu_ratio"] > 0
    flatten = results[0]
    assert {"cur", "ev", "city"} <= set(flatten["dictionary_columns"]) and "id" not in flatten["dictionary_columns"]
