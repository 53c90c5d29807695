"""``pt`` from the flush time in UTC: day, hour, minute, or no column at all."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from kafka_iceberg.decode import pt_value
from kafka_iceberg.spec.columns import PT_COLUMN
from tests.decode.conftest import table

FLUSH = datetime(2023, 7, 14, 1, 33, 59, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("window", "expected"),
    [("day", "07-14-2023"), ("hour", "07-14-2023 01"), ("minute", "07-14-2023 01:33"), ("none", None)],
)
def test_pt_formats(window: str, expected: str | None) -> None:
    assert pt_value(window, FLUSH) == expected


def test_pt_is_utc() -> None:
    shanghai = FLUSH.astimezone(timezone(timedelta(hours=8)))
    assert pt_value("minute", shanghai) == "07-14-2023 01:33"
    assert pt_value("hour", FLUSH.replace(tzinfo=None)) == "07-14-2023 01"  # naive means UTC
    with pytest.raises(ValueError, match="partition_window 'week'"):
        pt_value("week", FLUSH)


def test_pt_column_through_decode(run: Any) -> None:
    day = run(table("text", partition_window="day"), [("k", "v")], flush_time=FLUSH)
    assert [r[PT_COLUMN] for r in day.rows] == ["07-14-2023"]
    none = run(table("text", partition_window="none"), [("k", "v")], flush_time=FLUSH)
    assert PT_COLUMN not in none.decoded.rows.columns
    assert none.decoded.rows.columns == ["topic", "partition", "offset", "timestamp", "key", "value", "_ki_tombstone"]
