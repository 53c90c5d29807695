"""Independent read paths: pyiceberg for tables, a fresh confluent-kafka consumer for topics.

Tests and the demo read results through these, never through the Spark session that wrote them.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_iceberg.errors import NotInstalledError


def pyiceberg_catalog(status: Mapping[str, Any], name: str = "local") -> Any:
    """A pyiceberg REST catalog on the local stack described by ``local status --json``.

    SeaweedFS in anonymous mode wants no auth header at all (``noop``) and unsigned S3 requests.
    """
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError as exc:
        raise NotInstalledError("pyiceberg not installed: pip install 'pyiceberg[pyarrow]'") from exc
    # pyiceberg's S3 writes otherwise use chunked checksums that SeaweedFS stores verbatim.
    os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
    s3 = status["s3"]
    props: dict[str, Any] = {
        "type": "rest",
        "uri": status["catalog"]["uri"],
        "warehouse": status["catalog"]["warehouse"],
        "s3.endpoint": s3["endpoint"],
        "s3.region": s3["region"],
        "s3.path-style-access": "true",
    }
    if s3.get("access_key_id"):
        props.update(
            {
                "s3.access-key-id": s3["access_key_id"],
                "s3.secret-access-key": s3["secret_access_key"],
                "rest.sigv4-enabled": "true",
                "rest.signing-name": "s3tables",
                "rest.signing-region": s3["region"],
                "client.access-key-id": s3["access_key_id"],
                "client.secret-access-key": s3["secret_access_key"],
                "client.region": s3["region"],
            }
        )
    else:
        props.update({"auth": {"type": "noop"}, "s3.anonymous": "true"})
    return load_catalog(name, **props)


def _headers(msg: Any) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((str(k), v if v is None else bytes(v)) for k, v in (msg.headers() or ()))


@dataclass(frozen=True)
class TopicRecord:
    """One record as read back from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def read_topic(bootstrap: str, topic: str, *, timeout: float = 15.0) -> list[TopicRecord]:
    """Every committed record of ``topic`` up to the high watermarks, sorted by partition and offset.

    A fresh consumer group reads them, independent of any group of the code under test. Error
    topics are written in transactions: their last offset is a transaction marker, which no consumer
    receives, so a partition is read when the consumer's *position* reaches its high watermark (a
    record at the last offset never comes: waiting for one took the whole ``timeout``).
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kafka-iceberg-readback-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        deadline = time.monotonic() + timeout
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        # A topic created a moment ago may not have its leader yet (a loaded machine): ask again.
        while meta is not None and meta.error is not None and time.monotonic() < deadline:
            time.sleep(0.2)
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        remaining = {p for p, end in ends.items() if end > 0}
        out: list[TopicRecord] = []
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is None:
                    out.append(
                        TopicRecord(
                            str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0), msg.key(),
                            msg.value(), _headers(msg), int(msg.timestamp()[1]),
                        )
                    )  # fmt: skip
            for tp in consumer.position([TopicPartition(topic, p) for p in remaining]):
                if tp.offset >= ends[tp.partition]:
                    remaining.discard(tp.partition)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()
