"""Every row of the error-handling table and every expectation action, end to end, with each writer.

Spark's writer takes a batch step by step; the Arrow writer's single pass sorts every record in the
task that writes the data files (checks/labels.py). Both must route, count and fail alike.
"""

from __future__ import annotations

import pytest

from kafka_iceberg.errors import ExpectationFailedError, RecordError
from tests.support.kafka import consume_all, produce
from tests.support.run import run_pipeline, unique
from tests.support.store import files_under
from tests.support.verify import assert_verified

pytestmark = pytest.mark.integration

GOOD_BAD_GOOD = [
    ("1", '{"id": 1, "amount": 10.5}'),
    ("2", '{"id": "two", "amount": 3}'),  # id is not a long
    ("3", '{"id": 3, "amount": -1}'),
    ("4", "not json at all"),
    ("5", '{"id": 5, "amount": 0}'),
]


def pipeline(ns, topic, errors="", expectations="", writer="spark"):
    return f"""
pipeline: policy
catalog: lake
tables:
  - name: orders
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten}}
    schema: {{columns: {{id: long, amount: double}}}}
    schema_evolution: strict
    partition_window: none
    write: {{engine: {writer}}}
{errors}{expectations}"""


def data_files_left(lake, ns, name="orders"):
    """The objects under the table's data folder, read from the store: a failed batch leaves none behind."""
    table = lake.pyiceberg().load_table(f"{ns}.{name}")
    return files_under(lake.status, f"{table.metadata.location}/data")


def table_rows(lake, ns, name="orders"):
    catalog = lake.pyiceberg()
    if not catalog.table_exists(f"{ns}.{name}"):
        return None
    return sorted(r["id"] for r in catalog.load_table(f"{ns}.{name}").scan().to_arrow().to_pylist())


@pytest.fixture(params=["spark", "arrow"])
def source(stack, request):
    ns, topic = unique("policy"), unique("orders")
    produce(stack.kafka_bootstrap, topic, GOOD_BAD_GOOD, partition=0)
    return ns, topic, request.param


def test_no_skip_no_target_fails_the_batch_and_commits_nothing(tmp_path, lake, source):
    ns, topic, writer = source
    ran = run_pipeline(tmp_path, pipeline(ns, topic, writer=writer), expect_error=True)
    assert isinstance(ran.error, RecordError)
    assert (ran.error.topic, ran.error.partition, ran.error.offset) == (topic, 0, 1)
    assert "id" in ran.error.reason and "two" in ran.error.reason
    assert table_rows(lake, ns) in (None, [])  # nothing of the batch committed
    if table_rows(lake, ns) is not None:  # the Arrow writer creates the table before its tasks write
        assert data_files_left(lake, ns) == []
    assert_verified(tmp_path / "pipelines" / "p.yml")


def test_skip_without_target_drops_and_counts(tmp_path, lake, source):
    ns, topic, writer = source
    ran = run_pipeline(tmp_path, pipeline(ns, topic, writer=writer, errors="    errors: {skip_error: true}\n"))
    assert table_rows(lake, ns) == [1, 3, 5]
    assert sum(r.records_skipped for r in ran.reports) == 2
    assert sum(r.records_failed for r in ran.reports) == 2
    assert_verified(tmp_path / "pipelines" / "p.yml")


@pytest.mark.parametrize("skip_error", ["false", "true"])
def test_error_topic_keeps_good_records_flowing(tmp_path, lake, stack, source, skip_error, monkeypatch):
    from kafka_iceberg.checks.error_topic import ErrorTopicPublisher

    closed = []
    close = ErrorTopicPublisher.close
    monkeypatch.setattr(ErrorTopicPublisher, "close", lambda self: closed.append(self.topic) or close(self))
    ns, topic, writer = source
    errors_topic = unique("errors")
    errors = f"    errors: {{skip_error: {skip_error}, error_topic: {errors_topic}}}\n"
    ran = run_pipeline(tmp_path, pipeline(ns, topic, writer=writer, errors=errors))
    assert closed == [errors_topic]  # the run shut its producer down: no reconnecting after the broker is gone
    assert table_rows(lake, ns) == [1, 3, 5]
    bad = consume_all(stack.kafka_bootstrap, errors_topic)
    assert sorted(m.value for m in bad) == sorted([GOOD_BAD_GOOD[1][1].encode(), GOOD_BAD_GOOD[3][1].encode()])
    assert sum(r.records_published for r in ran.reports) == 2 and sum(r.records_skipped for r in ran.reports) == 0
    assert_verified(tmp_path / "pipelines" / "p.yml")


def test_quarantine_table_with_skip_error(tmp_path, lake, source):
    ns, topic, writer = source
    errors = f"    errors: {{skip_error: true, quarantine_table: {ns}.orders_bad}}\n"
    run_pipeline(tmp_path, pipeline(ns, topic, writer=writer, errors=errors))
    assert table_rows(lake, ns) == [1, 3, 5]
    bad = lake.pyiceberg().load_table(f"{ns}.orders_bad").scan().to_arrow().to_pylist()
    assert sorted(r["offset"] for r in bad) == [1, 3]
    assert {r["_error_stage"] for r in bad} == {"decode"}
    assert_verified(tmp_path / "pipelines" / "p.yml")


def test_expectation_actions_warn_drop_quarantine(tmp_path, lake, source):
    ns, topic, writer = source
    errors = f"    errors: {{skip_error: true, quarantine_table: {ns}.orders_q}}\n"
    expectations = (
        "    expectations:\n"
        "      small: {expr: 'amount < 10', on_violation: warn}\n"
        "      not_negative: {expr: 'amount >= 0', on_violation: quarantine}\n"
        "      not_zero: {expr: 'amount <> 0', on_violation: drop}\n"
    )
    ran = run_pipeline(tmp_path, pipeline(ns, topic, writer=writer, errors=errors, expectations=expectations))
    assert table_rows(lake, ns) == [1]  # 3 quarantined, 5 dropped, 1 only warned about
    quarantined = lake.pyiceberg().load_table(f"{ns}.orders_q").scan().to_arrow().to_pylist()
    by_offset = {r["offset"]: r for r in quarantined}
    assert sorted(by_offset) == [1, 2, 3]  # the two undecodable records and the rule's violator
    q = by_offset[2]
    assert q["_error_stage"] == "expectation:not_negative" and by_offset[1]["_error_stage"] == "decode"
    assert q["_decoded"] == '{"id":3,"amount":-1.0}'
    (report,) = ran.reports
    assert report.expectations_failed == {"small": 1, "not_negative": 1, "not_zero": 1}
    assert report.expectations_passed == {"small": 2, "not_negative": 2, "not_zero": 2}
    assert report.records_dropped == 1 and report.records_quarantined == 3  # 2 decode errors + 1 rule
    assert_verified(tmp_path / "pipelines" / "p.yml")


def test_expectation_fail_stops_before_any_commit(tmp_path, lake, source):
    ns, topic, writer = source
    expectations = "    expectations:\n      positive: {expr: 'amount > 0', on_violation: fail}\n"
    errors = "    errors: {skip_error: true}\n"
    ran = run_pipeline(
        tmp_path, pipeline(ns, topic, writer=writer, errors=errors, expectations=expectations), expect_error=True
    )
    assert isinstance(ran.error, ExpectationFailedError)
    assert f"topic {topic} partition 0 offset 2" in str(ran.error)
    assert table_rows(lake, ns) in (None, [])
    if table_rows(lake, ns) is not None:
        assert data_files_left(lake, ns) == []
    assert_verified(tmp_path / "pipelines" / "p.yml")
