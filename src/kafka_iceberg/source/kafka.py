"""Kafka connection settings rendered for each client that uses them.

- :func:`client_config` → librdkafka (confluent-kafka) settings for the direct reader, the error
  topic producer and ``capture``;
- :func:`spark_source_options` → options of Spark's Kafka source (Databricks jobs).

Both keep ``${...}`` references until resolved; printing goes through ``refs.mask_mapping``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from kafka_iceberg.environment import KafkaSettings
from kafka_iceberg.refs import Resolver
from kafka_iceberg.spec.model import SourceSpec

ClientKind = Literal["consumer", "producer", "admin"]

# Spark's Kafka source on Databricks ships a relocated client: JAAS modules carry this prefix there.
DATABRICKS_KAFKA_SHADE = "kafkashaded."
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def client_config(settings: KafkaSettings, kind: ClientKind) -> dict[str, str]:
    """Settings for confluent-kafka (references unresolved): a consumer, producer or admin client."""
    conf: dict[str, str] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.security_protocol,
    }
    if settings.sasl_mechanism:
        conf["sasl.mechanisms"] = settings.sasl_mechanism
        conf["sasl.username"] = settings.sasl_username or ""
        conf["sasl.password"] = settings.sasl_password or ""
    if settings.ssl_ca_location:
        conf["ssl.ca.location"] = settings.ssl_ca_location
    extra = settings.consumer if kind == "consumer" else settings.producer if kind == "producer" else {}
    conf.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in extra.items()})
    return conf


def resolved_client_config(settings: KafkaSettings, kind: ClientKind, resolver: Resolver) -> dict[str, str]:
    """:func:`client_config` with every reference resolved (for handing to confluent-kafka)."""
    return resolver.settings(client_config(settings, kind))


def _jaas(settings: KafkaSettings, shaded: bool) -> str:
    assert settings.sasl_mechanism is not None
    module = _LOGIN_MODULES[settings.sasl_mechanism]
    if shaded:
        module = DATABRICKS_KAFKA_SHADE + module
    return f'{module} required username="{settings.sasl_username}" password="{settings.sasl_password}";'


def starting_offsets_option(source: SourceSpec) -> str:
    """``startingOffsets`` for Spark: ``earliest``, ``latest`` or the per-partition JSON."""
    offsets = source.starting_offsets
    if isinstance(offsets, str):
        return offsets
    return json.dumps({topic: {str(p): o for p, o in parts.items()} for topic, parts in offsets.items()})


def spark_source_options(source: SourceSpec, settings: KafkaSettings, *, shaded: bool = True) -> dict[str, str]:
    """Options of ``spark.readStream.format("kafka")`` for one table.

    Args:
        source: the table's source spec (subscription, starting offsets, batch bound).
        settings: the environment's Kafka settings (bootstrap, security, extra options).
        shaded: use Databricks' relocated JAAS module names (``kafkashaded.org.apache.kafka...``).
    """
    options: dict[str, Any] = {"kafka.bootstrap.servers": settings.bootstrap_servers}
    if source.topics:
        options["subscribe"] = ",".join(source.topics)
    else:
        options["subscribePattern"] = source.topic_pattern
    options["startingOffsets"] = starting_offsets_option(source)
    options["maxOffsetsPerTrigger"] = str(source.max_records_per_batch)
    options["failOnDataLoss"] = str(settings.fail_on_data_loss).lower()
    # Headers are needed to route bad records with their original headers, whatever the table keeps.
    options["includeHeaders"] = "true"
    options["kafka.security.protocol"] = settings.security_protocol
    if settings.sasl_mechanism:
        options["kafka.sasl.mechanism"] = settings.sasl_mechanism
        options["kafka.sasl.jaas.config"] = _jaas(settings, shaded)
    if settings.ssl_ca_location:
        options["kafka.ssl.truststore.location"] = settings.ssl_ca_location
    options.update(settings.spark_options)
    return {k: str(v) for k, v in options.items()}


def describe_options(options: Mapping[str, str]) -> dict[str, str]:
    """Options as they may be printed: credentials masked."""
    from kafka_iceberg.refs import mask_mapping

    return mask_mapping(options)
