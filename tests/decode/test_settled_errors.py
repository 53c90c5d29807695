"""Which schema-driven errors the Arrow writer's tasks settle themselves (``schemaful.decoded_fields``).

A record the bytes, the wire header or the writer schema refuse fails the same way with any codec of
the batch's schema ids: the task routes it, with the reason Spark's side (``decode_batch``) gives it.
A record of a schema id the task's codec does not know, or one the table's columns refuse, goes back
to Spark: the driver fetches the id first, and the columns may change with it.
"""

from __future__ import annotations

import json

import pyarrow as pa
from pyspark.sql import types as T

from kafka_iceberg.decode import schemaful
from kafka_iceberg.decode.codec import Codec
from kafka_iceberg.decode.schemaful import REASON

SCHEMA = json.dumps(
    {
        "title": "Click",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "page": {"type": "string"}},
        "required": ["id"],
    }
)
COLUMNS = T.StructType([T.StructField("id", T.LongType()), T.StructField("page", T.StringType())])


def wire(schema_id: int, doc: object) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + json.dumps(doc).encode()


def test_errors_the_columns_play_no_part_in_are_settled_with_sparks_sides_reasons() -> None:
    c = Codec("json_schema", "value", "_ki_value", True, COLUMNS, writers={1: SCHEMA}, unknown=frozenset({7}))
    values = [
        wire(1, {"id": 1, "page": "/"}),
        wire(1, {"page": "/"}),  # invalid against the writer schema: settled
        b'{"id": 1}',  # not the wire format: settled
        wire(9, {"id": 2}),  # an id the codec does not know: the driver fetches it
        wire(7, {"id": 3}),  # an id the registry is known not to have: settled
        None,  # settled
        wire(1, {"id": 2**70}),  # valid, but out of the column's range: the columns decide
        wire(1, {"id": 4}),
    ]
    batch = pa.RecordBatch.from_pydict(
        {"_ki_value": pa.array(values, pa.binary()), "offset": pa.array(range(len(values)), pa.int64())}
    )
    readers = schemaful.Readers(c)

    ok, decoded, fields, errors = schemaful.decoded_fields(batch, c, readers)

    assert ok.to_pylist() == [True, False, False, False, False, False, False, True]
    assert decoded.column("offset").to_pylist() == [0, 7]
    assert fields["id"].to_pylist() == [1, 4]
    sparks_side = schemaful.decode_batch(batch, c, schemaful.Readers(c)).column(REASON).to_pylist()
    assert errors == {i: sparks_side[i] for i in (1, 2, 4, 5)}
    assert "required property" in errors[1] and "wrong magic byte" in errors[2]
    assert "unknown schema id 9" in sparks_side[3] and "out of range" in sparks_side[6]  # left to Spark
