"""The Arrow writer puts every row in the partition Iceberg's Java puts it in, for every transform it takes.

pyiceberg computes the tasks' partition values (bucket and truncate in Rust, through FFI) and the
driver hands them to Java as ``ContentFileParser`` JSON; Spark's writer (Iceberg's Java) computes
its own. A row in the wrong partition is a row a filtered query never finds, so each spec below is
written by both writers from the same rows and the partitions compared file by file: which rows
each partition value holds. The rows carry what breaks transforms: nulls in every partitioned
column, negative numbers, times before 1970 (with and without a time zone), text outside ASCII
(and a 4-byte character), empty and non-UTF-8 bytes, longs past 2^53, and decimals up to 38 digits,
which reach a task unaligned for Rust's Arrow.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from kafka_iceberg.errors import ConfigError
from kafka_iceberg.spec.load import arrow_writer_unsupported
from kafka_iceberg.write.arrow_files import write_engine
from tests.write.conftest import files_table, make_spec, marker, rows

SCHEMA = "id BIGINT, city STRING, at TIMESTAMP, due DATE, price DECIMAL(10,2), n INT, blob BINARY, ntz TIMESTAMP_NTZ, big DECIMAL(38,6), l BIGINT"
UTC = dt.timezone.utc
CITIES = ["Zürich", "東京都", "São Paulo", "ab", "", "a\U0001f600bc", "Ωmega", "x" * 40, "a/b?c#d", "50% + 1=2"]


def data() -> list[tuple[Any, ...]]:
    out = []
    for i in range(64):
        at = dt.datetime(1968, 11, 26, 22, tzinfo=UTC) + dt.timedelta(hours=37 * i)
        null = i % 13 == 7  # a null in every column but id
        out.append(
            (
                (i - 32) * 7919,
                None if null or i % 11 == 0 else CITIES[i % len(CITIES)],
                None if null else at,
                None if null else (at + dt.timedelta(days=3 * i)).date(),
                None if null else decimal.Decimal(f"{(i - 30) * 13.37:.2f}"),
                None if null else i - 20,
                None if null else bytes([i, 255 - i, 0]) if i % 5 else b"",
                None if null else at.replace(tzinfo=None) + dt.timedelta(minutes=7 * i),
                None if null else decimal.Decimal(f"{(i - 30) * 123456789012.123457:.6f}"),
                None if null else (i - 32) * 10**15,
            )
        )
    return out


def rows_by_partition(writer: Any) -> dict[str, set[int]]:
    """Each data file's partition value (as the manifests hold it) → the ids its file holds (read from the file)."""
    out: dict[str, set[int]] = {}
    for f in files_table(writer).inspect.files().to_pylist():
        ids = pq.read_table(f["file_path"].removeprefix("file:"), columns=["id"]).column("id").to_pylist()
        out.setdefault(json.dumps(f["partition"], sort_keys=True, default=str), set()).update(ids)
    return out


@pytest.mark.parametrize(
    "partitioning",
    [
        [
            "truncate(3, city)", "bucket(5, n)", "months(at)", "years(due)", "bucket(4, price)", "truncate(2, blob)",
            "truncate(10, id)",
        ],
        ["bucket(8, city)", "truncate(3, n)", "bucket(3, at)", "bucket(6, due)", "truncate(5, price)", "bucket(4, blob)"],
        ["hours(at)", "due", "n", "price", "city"],
        ["days(ntz)", "bucket(7, big)", "truncate(1000, l)"],
        ["hours(ntz)", "truncate(1000000, big)", "bucket(16, l)"],
        ["bucket(5, ntz)", "big", "l"],
    ],
    ids=["truncate-months-years", "bucket", "hours-identity", "ntz-days", "ntz-hours", "ntz-bucket"],
)  # fmt: skip
def test_each_row_lands_in_the_partition_icebergs_java_puts_it_in(spark, new_writer, partitioning):
    by_writer = {}
    for engine in ("spark", "arrow"):
        writer = new_writer(write={"engine": engine}, partitioning=partitioning)
        writer.commit(spark.createDataFrame(data(), SCHEMA), marker(0))
        assert writer.engine == engine
        by_writer[engine] = rows_by_partition(writer)
        assert sorted(r["id"] for r in rows(files_table(writer))) == sorted(r[0] for r in data())
        # Read back through Spark too (Iceberg's Java resolves each file's path, special characters and all).
        assert sorted(r.id for r in spark.table(writer.table).select("id").collect()) == sorted(r[0] for r in data())
    assert by_writer["arrow"] == by_writer["spark"]
    assert len(by_writer["arrow"]) > 8  # the rows were spread


def test_two_partition_fields_on_one_column_take_sparks_writer():
    spec = make_spec(partitioning=["bucket(8, city)", "truncate(3, city)"], write={"engine": "arrow"})
    why = arrow_writer_unsupported(spec)
    assert why is not None and "city has 2: bucket(8, city), truncate(3, city)" in why
    auto = make_spec(partitioning=["bucket(8, city)", "truncate(3, city)"])
    assert write_engine(auto) == "spark"


def test_a_table_given_a_second_field_on_a_column_elsewhere_stops_the_arrow_writer_before_any_task(spark, new_writer):
    writer = new_writer(write={"engine": "arrow"}, partitioning=["bucket(8, city)"])
    writer.commit(spark.createDataFrame(data()[:4], SCHEMA), marker(0))
    files = files_table(writer).inspect.files().num_rows
    spark.sql(f"ALTER TABLE {writer.table} ADD PARTITION FIELD truncate(3, city)")  # another client
    with pytest.raises(ConfigError) as err:
        writer.commit(spark.createDataFrame(data()[4:8], SCHEMA), marker(1))
    message = str(err.value)
    assert (
        "write.engine" in message and "partition fields city_bucket and city_trunc_3 both read column city" in message
    ), message
    assert "spark (table" in message and "Traceback" not in message
    assert files_table(writer).inspect.files().num_rows == files
