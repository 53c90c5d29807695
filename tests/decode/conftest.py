"""Decode-stage fixtures: Kafka-shaped DataFrames built inline, table specs from dicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from kafka_iceberg.decode import Decoded, decode
from kafka_iceberg.decode.arrow import uses_arrow
from kafka_iceberg.spec.load import arrow_decoder_unsupported as arrow_unsupported
from kafka_iceberg.spec.model import TableSpec

DATA = Path(__file__).with_name("data")
KAFKA_SCHEMA = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, "
    "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
KAFKA_TS = datetime(2023, 7, 13, 21, 0, 0)
FLUSH = datetime(2023, 7, 13, 21, 13, 5, tzinfo=timezone.utc)

Bytes = bytes | str | None


def _b(value: Bytes) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


@dataclass(frozen=True)
class Msg:
    """One Kafka record for a test; offsets default to the position in the batch."""

    key: Bytes
    value: Bytes
    headers: Sequence[tuple[str, Bytes]] | None = None
    topic: str = "t"
    partition: int = 0
    offset: int | None = None


def kafka_rows(messages: Sequence[Msg | tuple[Bytes, Bytes]]) -> list[tuple[Any, ...]]:
    """Rows in :data:`KAFKA_SCHEMA` order."""
    out = []
    for i, m in enumerate(messages):
        msg = m if isinstance(m, Msg) else Msg(*m)
        headers = None if msg.headers is None else [(k, _b(v)) for k, v in msg.headers]
        offset = i if msg.offset is None else msg.offset
        out.append((_b(msg.key), _b(msg.value), msg.topic, msg.partition, offset, KAFKA_TS, headers))
    return out


@pytest.fixture(scope="session")
def kafka_df(spark: Any) -> Callable[[Sequence[Msg | tuple[Bytes, Bytes]]], Any]:
    """Build a Kafka-shaped DataFrame from (key, value) pairs or :class:`Msg` records."""

    def build(messages: Sequence[Msg | tuple[Bytes, Bytes]]) -> Any:
        return spark.createDataFrame(kafka_rows(messages), KAFKA_SCHEMA)

    return build


def table(fmt: str, **keys: Any) -> TableSpec:
    """A table spec reading topic ``t`` in ``fmt``; ``source_*`` keys go under ``source``."""
    source: dict[str, Any] = {"topics": ["t"], "format": fmt}
    for name in [k for k in keys if k.startswith("source_")]:
        source[name.removeprefix("source_")] = keys.pop(name)
    return TableSpec.model_validate({"name": "t", "namespace": "n", "source": source, **keys})


@dataclass
class Result:
    """A decoded batch, collected."""

    decoded: Decoded
    rows: list[Any]
    errors: list[Any]

    def reasons(self) -> dict[int, str]:
        """offset → ``_error``."""
        return {r["offset"]: r["_error"] for r in self.errors}

    def by_offset(self) -> dict[int, Any]:
        return {r["offset"]: r for r in self.rows}


def with_decoder(spec: TableSpec, decoder: str) -> TableSpec:
    """``spec`` with ``source.decoder`` set."""
    return spec.model_copy(update={"source": spec.source.model_copy(update={"decoder": decoder})})


def twin_decoder(spec: TableSpec) -> str | None:
    """The decoder ``spec`` does not use, when both can decode it (json, csv, flatten strict)."""
    if spec.source.format not in ("json", "csv", "flatten") or arrow_unsupported(spec) is not None:
        return None
    return "spark" if uses_arrow(spec) else "arrow"


def collect(decoded: Decoded) -> Result:
    """Rows and errors of a decoded batch, ordered by their Kafka coordinates."""
    rows = sorted(decoded.rows.collect(), key=lambda r: (r["topic"], r["partition"], r["offset"]))
    errors = sorted(decoded.errors.collect(), key=lambda r: (r["topic"], r["partition"], r["offset"]))
    return Result(decoded, rows, errors)


def sparks_errors(spark: Any, spec: TableSpec, values: Sequence[bytes]) -> dict[int, tuple[str, str | None]]:
    """What Spark's decoder makes of ``values`` (offsets 0, 1, ...) that it refuses: offset → (reason, ``_decoded``)."""
    rows = [(None, v, "t", 0, i, FLUSH.replace(tzinfo=None), None) for i, v in enumerate(values)]
    frame = spark.createDataFrame(rows, "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                                        "timestamp TIMESTAMP, headers ARRAY<STRUCT<key: STRING, value: BINARY>>")  # fmt: skip
    return {r["offset"]: (r["_error"], r["_decoded"]) for r in collect(decode(frame, spec, flush_time=FLUSH)).errors}


def assert_identical(one: Result, other: Result) -> None:
    """Same rows and error rows, value for value (``repr`` tells ``-0.0`` from ``0.0`` and shows NaN)."""
    assert [repr(r) for r in one.rows] == [repr(r) for r in other.rows]
    assert [repr(r) for r in one.errors] == [repr(r) for r in other.errors]


@pytest.fixture(scope="session")
def run(kafka_df: Callable[..., Any]) -> Callable[..., Result]:
    """Decode messages with a spec and collect rows and errors, ordered by offset.

    Where both decoders can decode the spec, the batch is decoded by both and the results must
    be identical: every decode test is also a test that the Arrow and Spark decoders agree.
    """

    def go(spec: TableSpec, messages: Sequence[Msg | tuple[Bytes, Bytes]], **kwargs: Any) -> Result:
        kwargs.setdefault("flush_time", FLUSH)
        df = kafka_df(messages)
        result = collect(decode(df, spec, **kwargs))
        twin = twin_decoder(spec)
        if twin is not None and not df.isStreaming:
            assert_identical(result, collect(decode(df, with_decoder(spec, twin), **kwargs)))
        return result

    return go
