"""Which Parquet columns the Arrow writer dictionary-encodes (``write/dictionaries.py``)."""

from __future__ import annotations

import decimal
import uuid

import pyarrow as pa

from kafka_iceberg.write.dictionaries import dictionary_columns, install
from tests.write.conftest import column_encodings


def test_a_dictionary_where_at_most_half_the_sampled_values_are_distinct_at_any_depth():
    n = 1000  # below the sample: every row counted
    table = pa.table(
        {
            "city": [("Berlin", "Paris", None)[i % 3] for i in range(n)],
            "id": pa.array(range(n), pa.int64()),
            "note": [f"note {i}" for i in range(n)],
            "half": [i // 2 for i in range(n)],  # each value twice: exactly half distinct
            "vip": [i % 2 == 0 for i in range(n)],  # booleans are bit-packed: never a dictionary
            "empty": pa.nulls(n, pa.string()),
            "ctx": pa.array([{"agent": "ua", "ref": f"r{i}"} for i in range(n)]),
            "tags": pa.array([["a", "b"] for _ in range(n)]),
            "attrs": pa.array([[("k", f"v{i}")] for i in range(n)], pa.map_(pa.string(), pa.string())),
            "price": pa.array([decimal.Decimal(i % 7) for i in range(n)], pa.decimal128(10, 2)),
            "ref": pa.array([uuid.UUID(int=i % 3).bytes for i in range(n)], pa.uuid()),
            "trace": pa.array([uuid.UUID(int=i).bytes for i in range(n)], pa.uuid()),
        }
    )
    assert dictionary_columns(table) == [
        "city", "half", "ctx.agent", "tags.list.element", "attrs.key_value.key", "price", "ref"
    ]  # fmt: skip


def test_the_sample_is_spread_over_the_whole_file():
    # Distinct values at the start, few after: an even sample sees the whole column.
    values = [f"start {i}" for i in range(1500)] + [f"later {i % 10}" for i in range(48500)]
    assert dictionary_columns(pa.table({"v": values})) == ["v"]
    assert dictionary_columns(pa.table({"v": values[:1500]})) == []


def test_pyiceberg_writes_with_the_chosen_dictionaries_and_keeps_its_statistics(tmp_path):
    from pyiceberg.io.pyarrow import PyArrowFileIO, _dataframe_to_data_files
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import LongType, NestedField, StringType

    install()
    install()  # once per process, whoever asks
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "city", StringType(), required=False)
    )
    metadata = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, f"file://{tmp_path}", {})
    data = pa.table(
        {"id": pa.array(range(3000), pa.int64()), "city": [("Berlin", "Paris")[i % 2] for i in range(3000)]}
    )
    (written,) = _dataframe_to_data_files(metadata, data, PyArrowFileIO())
    encodings = column_encodings(written.file_path.removeprefix("file://"))
    assert "RLE_DICTIONARY" in encodings["city"] and "RLE_DICTIONARY" not in encodings["id"]
    assert written.record_count == 3000 and written.value_counts == {1: 3000, 2: 3000}
    assert written.lower_bounds and written.upper_bounds


def test_a_column_arrow_cannot_count_keeps_pyarrows_own_choice_a_dictionary():
    # Arrow has no distinct count for dictionary arrays: such a column stays one, all values distinct or not.
    n = 1000
    table = pa.table({"topic": pa.array([f"t{i}" for i in range(n)]).dictionary_encode(), "id": pa.array(range(n))})
    assert dictionary_columns(table) == ["topic"]
