"""kafka-iceberg: declare Kafka → Iceberg tables once; run them on Spark, locally and on Databricks.

Python definitions use the decorators re-exported here; YAML pipeline files produce the same
validated :class:`TableSpec` models.
"""

from __future__ import annotations

from kafka_iceberg.errors import ConfigError, KafkaIcebergError, Problem
from kafka_iceberg.spec.api import (
    ListRegistry,
    Registry,
    expect,
    expect_or_drop,
    expect_or_fail,
    expect_or_quarantine,
    registration_context,
    table,
)
from kafka_iceberg.spec.load import load_pipeline, load_pipelines, parse_pipeline
from kafka_iceberg.spec.model import Pipeline, TableSpec

__all__ = [
    "ConfigError",
    "KafkaIcebergError",
    "ListRegistry",
    "Pipeline",
    "Problem",
    "Registry",
    "TableSpec",
    "expect",
    "expect_or_drop",
    "expect_or_fail",
    "expect_or_quarantine",
    "load_pipeline",
    "load_pipelines",
    "parse_pipeline",
    "registration_context",
    "table",
]
__version__ = "0.1.0"
