"""Decode on streaming DataFrames (file source → memory sink, availableNow) equals decode on batches."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality

from kafka_iceberg.decode import decode
from tests.decode.conftest import FLUSH, KAFKA_SCHEMA, Msg, table

ORDER = ("topic", "partition", "offset")
SPECS: dict[str, tuple[Any, list[Msg], tuple[int, int]]] = {
    "csv": (
        table("csv", schema={"columns": {"id": "long", "name": "string"}}, source_include_headers=True),
        [Msg("k", "1,a", headers=[("h", "1")]), Msg("k", "x,b"), Msg("k", "2,c,d"), Msg("k", None)],
        (1, 3),
    ),
    "flatten": (
        table(
            "flatten",
            schema={"columns": {"id": "long", "name": "string"}},
            schema_evolution="strict",
            commit_mode="upsert",
            key_fields=["id"],
        ),
        [Msg("k", '{"id":1,"name":"a"}'), Msg("3", None), Msg("k", '{"id":2,"x":1}'), Msg("k", "{bad")],
        (2, 2),
    ),
}


def _drain(df: Any, tmp: Path) -> str:
    name = f"decode_{uuid.uuid4().hex[:8]}"
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp / name))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return name


@pytest.mark.parametrize("fmt", sorted(SPECS))
def test_streaming_equals_batch(spark: Any, kafka_df: Any, tmp_path: Path, fmt: str) -> None:
    spec, messages, counts = SPECS[fmt]
    kafka_df(messages).write.parquet(str(tmp_path / "in"))
    batch = decode(spark.read.schema(KAFKA_SCHEMA).parquet(str(tmp_path / "in")), spec, flush_time=FLUSH)
    stream = decode(spark.readStream.schema(KAFKA_SCHEMA).parquet(str(tmp_path / "in")), spec, flush_time=FLUSH)
    assert stream.rows.isStreaming and stream.errors.isStreaming

    rows, errors = _drain(stream.rows, tmp_path), _drain(stream.errors, tmp_path)
    # ordered explicitly: chispa's ignore_row_order cannot sort the headers map
    assert_df_equality(spark.table(rows).orderBy(*ORDER), batch.rows.orderBy(*ORDER), ignore_nullable=True)
    assert_df_equality(spark.table(errors).orderBy(*ORDER), batch.errors.orderBy(*ORDER), ignore_nullable=True)
    assert (batch.rows.count(), batch.errors.count()) == counts


def test_discovery_inside_foreach_batch(spark: Any, kafka_df: Any, tmp_path: Path) -> None:
    """How a runner decodes flatten with add_columns: each micro-batch is a batch DataFrame."""
    kafka_df([("k", '{"id":1,"fresh":true}'), ("k", '{"id":2}')]).write.parquet(str(tmp_path / "in"))
    seen: list[tuple[dict[str, str], int, int]] = []

    def each(batch: Any, _batch_id: int) -> None:
        decoded = decode(batch, table("flatten", schema={"columns": {"id": "long"}}), flush_time=FLUSH)
        seen.append((decoded.new_columns, decoded.rows.count(), decoded.errors.count()))

    query = (
        spark.readStream.schema(KAFKA_SCHEMA)
        .parquet(str(tmp_path / "in"))
        .writeStream.foreachBatch(each)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert seen == [({"fresh": "boolean"}, 2, 0)]
