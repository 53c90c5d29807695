"""``verify``'s reconciliation without services: each offset in exactly one place, or dropped."""

from __future__ import annotations

from collections import Counter

from kafka_iceberg.observe.verify import batch_continuity, reconcile, render_json, render_text

T = "src"


def _run(rows, *, quarantine=None, error_topic=None, dropped=0, upsert=False, end=10):
    return reconcile(
        "ns.t", source={(T, 0): range(end)}, bounds={(T, 0): (0, end)}, rows=Counter(rows),
        quarantine=quarantine, error_topic=Counter(error_topic) if error_topic is not None else None,
        dropped=dropped, upsert=upsert,
    )  # fmt: skip


def test_every_offset_in_one_place_passes():
    rows = [(T, 0, o) for o in range(10) if o != 3]
    result = _run(rows, quarantine={(T, 0, 3): ["decode"]}, error_topic=[(T, 0, 3)])
    assert result.ok, result.problems
    (p,) = result.partitions
    assert (p.expected, p.found, p.missing, p.duplicated) == (10, 10, 0, 0)


def test_a_row_appended_twice_is_a_duplicate_with_its_offset():
    rows = [(T, 0, o) for o in range(10)] + [(T, 0, 4)]
    result = _run(rows)
    assert not result.ok
    assert result.partitions[0].duplicated == 1
    assert result.partitions[0].duplicated_offsets == [{"offset": 4, "table": 2}]
    assert "src[0]: 1 duplicated, offsets 4" in result.problems[0]


def test_a_deleted_offset_range_is_a_gap_with_its_range():
    rows = [(T, 0, o) for o in range(10) if not 2 <= o <= 5]
    result = _run(rows)
    assert not result.ok
    assert result.partitions[0].missing_offsets == [[2, 5]]
    assert "src[0]: 4 missing, offsets 2-5" in result.problems[0]


def test_a_record_in_the_table_and_an_error_target_is_a_duplicate():
    rows = [(T, 0, o) for o in range(10)]
    result = _run(rows, error_topic=[(T, 0, 3)])
    assert result.partitions[0].duplicated_offsets == [{"offset": 3, "table": 1, "error topic": 1}]


def test_a_bad_record_lost_from_the_error_topic_is_named():
    rows = [(T, 0, o) for o in range(10) if o != 3]
    result = _run(rows, quarantine={(T, 0, 3): ["decode"]}, error_topic=[])
    assert result.problems == ["src[0] offset 3: not in the error topic"]
    # A quarantine expectation sends its records to the quarantine table only.
    assert _run(rows, quarantine={(T, 0, 3): ["expectation:valid"]}, error_topic=[]).ok


def test_a_lost_error_record_with_the_error_topic_alone_is_a_gap():
    rows = [(T, 0, o) for o in range(10) if o != 3]
    result = _run(rows, error_topic=[])
    assert result.partitions[0].missing_offsets == [[3, 3]] and not result.ok


def test_drops_account_for_absent_offsets_up_to_their_count():
    rows = [(T, 0, o) for o in range(10) if o not in (1, 2)]
    assert _run(rows, dropped=2).ok
    assert not _run(rows, dropped=1).ok


def test_offsets_absent_from_kafka_are_not_expected():
    """Transaction markers and aborted records leave offsets that hold no record."""
    result = reconcile(
        "ns.t", source={(T, 0): [0, 1, 3]}, bounds={(T, 0): (0, 5)}, rows=Counter([(T, 0, 0), (T, 0, 1), (T, 0, 3)])
    )
    assert result.ok and result.partitions[0].expected == 3


def test_rows_beyond_the_committed_offsets_are_reported():
    rows = [(T, 0, o) for o in range(12)]
    result = _run(rows)
    assert any("beyond the committed offsets" in p for p in result.problems)


def test_upsert_tables_are_reconciled_per_batch_and_say_so():
    rows = [(T, 0, 9)]  # one key, its latest version
    result = _run(rows, upsert=True)
    assert result.ok and result.mode == "per-batch"
    assert any("upsert/overwrite table" in n for n in result.notes)
    assert batch_continuity([(0, {T: {0: 5}}), (1, {T: {0: 9}})]) == []
    assert batch_continuity([(0, {T: {0: 5}}), (1, {T: {0: 4}})]) == ["batch 1: src[0] went back from 5 to 4"]


def test_outputs_name_the_partition_and_the_verdict():
    result = _run([(T, 0, o) for o in range(9)])
    text = render_text([result])
    assert "ns.t" in text and "FAILED" in text and "src[0]: 1 missing, offsets 9" in text
    assert '"ok": false' in render_json([result])
