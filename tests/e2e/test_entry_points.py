"""Each format's console entry point, run as a subprocess like a bundle job, on the example
pipelines of fixtures/pipelines; results read back through pyiceberg and a Kafka consumer."""

from __future__ import annotations

import re

import pytest

from kafka_iceberg.observe.summary import parse_summary
from tests.support.kafka import consume_all, produce
from tests.support.project import REPO, entry_point
from tests.support.verify import assert_verified

pytestmark = pytest.mark.integration
PIPELINES = REPO / "fixtures" / "pipelines"
MINUTE_PT = re.compile(r"^\d{2}-\d{2}-\d{4} \d{2}:\d{2}$")


def ingest(fmt, pipeline, stack):
    result = entry_point(
        f"ingest-{fmt}", "--pipeline", str(PIPELINES / pipeline), "--env", "local", stack_dir=stack.run_dir
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert_verified(PIPELINES / pipeline)
    return result


def read(lake, identifier):
    rows = lake.pyiceberg().load_table(identifier).scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["partition"], r["offset"]))


def test_ingest_text(stack, lake):
    produce(stack.kafka_bootstrap, "topic_text", [("123", "abc"), ("456", "edf")], partition=0)
    result = ingest("text", "text.yml", stack)
    rows = read(lake, "examples.table_text")
    assert [(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in rows] == [
        ("topic_text", 0, 0, None, "abc"),
        ("topic_text", 0, 1, None, "edf"),
    ]
    assert all(MINUTE_PT.match(r["pt"]) for r in rows)
    # The line `kafka-iceberg workspace smoke` reads back from a job run's output.
    summary = parse_summary(result.stdout)
    assert summary is not None, result.stdout
    assert (summary["records_written"], summary["records_failed"]) == (2, 0)
    table = summary["tables"]["examples.table_text"]
    assert (
        table["last_commit"]
        and table["snapshot_id"] == lake.pyiceberg().load_table("examples.table_text").metadata.current_snapshot_id
    )


def test_ingest_csv(stack, lake):
    produce(stack.kafka_bootstrap, "topic_csv", [("123", "1103,zhangsan,china"), ("456", "1104,lisi,usa")], partition=0)
    ingest("csv", "csv.yml", stack)
    rows = read(lake, "examples.table_csv")
    assert [(r["topic"], r["offset"], r["id"], r["name"], r["region"]) for r in rows] == [
        ("topic_csv", 0, 1103, "zhangsan", "china"),
        ("topic_csv", 1, 1104, "lisi", "usa"),
    ]


def test_ingest_json(stack, lake):
    docs = ['{"id":123,"name":"json-1","region":"beijing"}', '{"id":456,"name":"json-2","region":"hangzhou"}']
    produce(stack.kafka_bootstrap, "topic_json", [("123", docs[0]), ("456", docs[1])], partition=0)
    ingest("json", "json.yml", stack)
    rows = read(lake, "examples.table_json")
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(0, None, docs[0]), (1, None, docs[1])]


def test_ingest_flatten(stack, lake):
    produce(
        stack.kafka_bootstrap,
        "topic_flatten",
        [
            ("123", '{"id":123,"name":"json-1","extendinfo":{"region":"beijing","sex":"M"}}'),
            ("456", '{"id":456,"name":"json-2","extendinfo":{"region":"hangzhou","sex":"W"}}'),
        ],
        partition=0,
    )
    ingest("flatten", "flatten.yml", stack)
    rows = read(lake, "examples.table_flatten")
    assert [(r["offset"], r["id"], r["name"], r["extendinfo"]) for r in rows] == [
        (0, 123, "json-1", '{"region":"beijing","sex":"M"}'),
        (1, 456, "json-2", '{"region":"hangzhou","sex":"W"}'),
    ]


def test_ingest_binary(stack, lake):
    produce(stack.kafka_bootstrap, "topic_binary", [(b"\x00k", b"\xff\xfe\x00raw"), (None, b"")], partition=0)
    ingest("binary", "binary.yml", stack)
    rows = read(lake, "examples.table_binary")
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [(0, b"\x00k", b"\xff\xfe\x00raw"), (1, None, b"")]
    assert "pt" not in rows[0]  # partition_window: none


ABNORMAL = [
    ("100", '{"id":100,"name":"json-3","extendinfo":{"region":"beijing","gender":"M"}}'),
    ("101", '{"id":101,"name":"json-4","extendinfos":"null"}'),
    ("102", '{"id":102,"name":"json-5","extendinfo":{"region":"beijing","gender":"M"}}'),
]


def test_maxcompute_abnormal_data_goes_to_the_error_topic_byte_for_byte(stack, lake):
    produce(stack.kafka_bootstrap, "topic_abnormal", ABNORMAL, partition=0)
    result = ingest("flatten", "flatten_abnormal.yml", stack)
    assert "examples.table_abnormal" in result.stdout
    rows = read(lake, "examples.table_abnormal")
    assert [(r["offset"], r["id"]) for r in rows] == [(0, 100), (2, 102)]
    (bad,) = consume_all(stack.kafka_bootstrap, "runtime_error")
    assert bad.key == b"101" and bad.value == ABNORMAL[1][1].encode()
    headers = dict(bad.headers)
    assert headers["kafka_iceberg.errors.offset"] == b"1"
    assert b"extendinfos" in headers["kafka_iceberg.errors.reason"]


def test_maxcompute_abnormal_data_with_a_quarantine_table(stack, lake):
    produce(stack.kafka_bootstrap, "topic_quarantine", ABNORMAL, partition=0)
    ingest("flatten", "flatten_quarantine.yml", stack)
    rows = read(lake, "examples.table_quarantined")
    assert [(r["offset"], r["id"]) for r in rows] == [(0, 100), (2, 102)]
    (q,) = read(lake, "examples.table_quarantined_errors")
    assert (q["topic"], q["partition"], q["offset"]) == ("topic_quarantine", 0, 1)
    assert q["key"] == b"101" and q["value"] == ABNORMAL[1][1].encode()
    assert q["_error_stage"] == "decode" and "extendinfos" in q["_error"]
    assert q["_pipeline"] == "example_quarantine" and q["_table"] == "examples.table_quarantined"


def test_ingest_a_pipeline_file_outside_the_project(stack, lake, tmp_path):
    """`ingest-text --pipeline /elsewhere/p.yml --env local`, started in the project root (issue 18)."""
    from tests.support.kafka import create_topic
    from tests.support.run import unique

    ns, topic = unique("outside"), unique("outside")
    pipeline = tmp_path / "x" / "p.yml"
    pipeline.parent.mkdir()
    pipeline.write_text(
        f"pipeline: outside\ncatalog: lake\ntables:\n"
        f"  - {{name: lines, namespace: {ns}, source: {{topics: [{topic}], format: text, mode: value}}}}\n"
    )
    create_topic(stack.kafka_bootstrap, topic)
    produce(stack.kafka_bootstrap, topic, [("1", "first"), ("2", "second")], partition=0)
    result = entry_point("ingest-text", "--pipeline", str(pipeline), "--env", "local", stack_dir=stack.run_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(r["offset"], r["value"]) for r in read(lake, f"{ns}.lines")] == [(0, "first"), (1, "second")]
    assert_verified(pipeline)


def test_upsert_across_runs_and_an_idempotent_rerun_through_spark_kafka_source(stack, lake, tmp_path):
    """`ingest-flatten --env local` reads with Spark's Kafka source (its checkpoint appears under the
    run directory): a second run upserts and deletes by key, a third one with nothing new changes nothing."""
    import json as _json
    from pathlib import Path

    from tests.support.kafka import create_topic
    from tests.support.run import unique

    ns, topic = unique("upsert_runs"), unique("upsert_runs")
    pipeline = tmp_path / "p.yml"
    pipeline.write_text(
        f"pipeline: upsert_runs\ncatalog: lake\ntables:\n"
        f"  - name: accounts\n    namespace: {ns}\n"
        f"    source: {{topics: [{topic}], format: flatten}}\n"
        f"    schema: {{columns: {{id: long, balance: long}}}}\n"
        f"    commit_mode: upsert\n    key_fields: [id]\n    partition_window: none\n"
    )
    create_topic(stack.kafka_bootstrap, topic, partitions=2)

    def doc(i: int, balance: int) -> str:
        return _json.dumps({"id": i, "balance": balance})

    def run() -> None:
        result = entry_point("ingest-flatten", "--pipeline", str(pipeline), "--env", "local", stack_dir=stack.run_dir)
        assert result.returncode == 0, result.stdout + result.stderr

    def table() -> dict[int, int]:
        rows = lake.pyiceberg().load_table(f"{ns}.accounts").scan(selected_fields=("id", "balance")).to_arrow()
        return dict(zip(rows.column("id").to_pylist(), rows.column("balance").to_pylist(), strict=True))

    produce(stack.kafka_bootstrap, topic, [(str(i), doc(i, 10 * i)) for i in range(1, 5)])
    run()
    assert table() == {1: 10, 2: 20, 3: 30, 4: 40}
    # Spark's Kafka source, as on clusters: its offsets log is in the run directory's checkpoint.
    checkpoint = Path(stack.run_dir) / "checkpoints" / "upsert_runs" / f"{ns}.accounts"
    assert (checkpoint / "offsets").is_dir() and (checkpoint / "sources").is_dir(), sorted(checkpoint.rglob("*"))

    produce(stack.kafka_bootstrap, topic, [("2", doc(2, 21)), ("2", doc(2, 22)), ("3", None), ("5", doc(5, 50))])
    run()
    assert table() == {1: 10, 2: 22, 4: 40, 5: 50}  # latest per key wins, the tombstone deleted 3
    snapshot = lake.pyiceberg().load_table(f"{ns}.accounts").metadata.current_snapshot_id

    run()  # nothing new: no commit, nothing twice
    assert lake.pyiceberg().load_table(f"{ns}.accounts").metadata.current_snapshot_id == snapshot
    assert table() == {1: 10, 2: 22, 4: 40, 5: 50}
    assert_verified(pipeline)  # an upsert table: reconciled per batch from its markers
