"""The summary line an ingest run prints last, and ``--available-now``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from kafka_iceberg.observe.report import BatchReport
from kafka_iceberg.observe.summary import parse_summary, summarize, summary_line

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc)


def test_summary_counts_and_last_commit_per_table_round_trip():
    reports = [
        BatchReport(
            "shop",
            "sales.orders",
            0,
            "s",
            T0,
            records_written=10,
            records_failed=1,
            committed=True,
            snapshot_id=5,
            lag=7,
            records_lost={"orders[0] 4-7": 4},
        ),
        BatchReport(
            "shop", "sales.orders", 1, "s", T0 + dt.timedelta(minutes=1), records_written=0, committed=False, lag=0
        ),
        BatchReport("shop", "sales.returns", 0, "s", T0, records_written=4, committed=True, snapshot_id=9),
    ]
    summary = summarize(reports, ["sales.orders", "sales.returns", "sales.empty"])
    logs = "noise\n" + summary_line({"records_written": 1}) + "\n" + summary_line(summary) + "\nINFO shutdown\n"

    parsed = parse_summary(logs)

    assert parsed == summary
    assert parsed["records_written"] == 14 and parsed["records_failed"] == 1 and parsed["records_lost"] == 4
    assert parsed["tables"]["sales.orders"] == {
        "batches": 2, "records_written": 10, "records_failed": 1, "records_quarantined": 0, "records_published": 0,
        "records_lost": 4, "last_commit": T0.isoformat(), "snapshot_id": 5, "lag": 0,
    }  # fmt: skip
    assert parsed["tables"]["sales.empty"]["last_commit"] is None


def test_parse_summary_without_a_line_or_with_a_broken_one():
    assert parse_summary(None) is None
    assert parse_summary("just logs\n") is None
    assert parse_summary("kafka-iceberg-summary: {not json") is None


def test_available_now_overrides_every_table_trigger(stack):  # the local environment resolves against the stack
    from kafka_iceberg.run import prepare

    prepared = prepare(REPO / "pipelines" / "shop.yml", env_name="local", available_now=True)

    assert prepared.jobs
    assert all(j.spec.trigger.available_now and not j.spec.trigger.processing_time for j in prepared.jobs)
