"""Iceberg table properties a table spec sets, and the writer's own settings read from them.

Every key is declared once, with its ``_DEFAULT`` partner where one exists. Typed readers report
the key and the offending value (:class:`~kafka_iceberg.errors.ConfigError`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_iceberg.errors import ConfigError
from kafka_iceberg.spec.model import TARGET_FILE_SIZE_MB_DEFAULT, TableSpec

FORMAT_VERSION = "format-version"
FORMAT_VERSION_DEFAULT = "2"  # SeaweedFS, S3 Tables and OSS Tables all take v2; v3 deletion vectors are refused.
TARGET_FILE_SIZE_BYTES = "write.target-file-size-bytes"
TARGET_FILE_SIZE_BYTES_DEFAULT = TARGET_FILE_SIZE_MB_DEFAULT * 1024 * 1024
PARQUET_COMPRESSION = "write.parquet.compression-codec"
PARQUET_COMPRESSION_DEFAULT = "zstd"
# Streaming upserts touch keys spread over the whole table: merge-on-read writes small position-delete
# files instead of rewriting every data file holding a matched key (copy-on-write, Iceberg's default).
MERGE_MODE = "write.merge.mode"
MERGE_MODE_DEFAULT = "merge-on-read"

# The writer's commit retries; the same keys are Iceberg's own table properties for its internal
# metadata-swap retry, so one setting bounds both layers (docs/write.md, "Retries").
COMMIT_NUM_RETRIES = "commit.retry.num-retries"
COMMIT_NUM_RETRIES_DEFAULT = 4
COMMIT_MIN_WAIT_MS = "commit.retry.min-wait-ms"
COMMIT_MIN_WAIT_MS_DEFAULT = 100
COMMIT_MAX_WAIT_MS = "commit.retry.max-wait-ms"
COMMIT_MAX_WAIT_MS_DEFAULT = 60_000

# Properties set only when a table is created; changing them later is not a property update.
CREATE_ONLY = frozenset({FORMAT_VERSION})

_CODECS = {"none": "uncompressed"}  # table-spec spelling → Iceberg's


def table_properties(spec: TableSpec) -> dict[str, str]:
    """Every table property the spec declares, ``write.properties`` last (it wins)."""
    out = {
        FORMAT_VERSION: FORMAT_VERSION_DEFAULT,
        TARGET_FILE_SIZE_BYTES: str(spec.write.target_file_size_mb * 1024 * 1024),
        PARQUET_COMPRESSION: _CODECS.get(spec.write.compression, spec.write.compression),
    }
    if spec.upserts:
        out[MERGE_MODE] = MERGE_MODE_DEFAULT
    out.update(spec.write.properties)
    return out


def int_property(spec: TableSpec, key: str, default: int, *, minimum: int = 0) -> int:
    """An integer from ``write.properties``.

    Raises:
        ConfigError: the value is not an integer of at least ``minimum``; names the key and the value.
    """
    raw = spec.write.properties.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ConfigError.one(
            spec.declared_in, f"write.properties.{key}", raw, f"an integer >= {minimum}", "INVALID_VALUE"
        )
    return value


def changed_properties(declared: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """Declared properties whose value on the table differs (create-only keys left out)."""
    return {k: v for k, v in declared.items() if k not in CREATE_ONLY and current.get(k) != v}
