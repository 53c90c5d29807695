"""Catalog targets: the profiles an environment declares, and their Spark settings.

:mod:`.profiles` holds the validated models, :mod:`.rendering` their Spark settings.
"""

from __future__ import annotations

from kafka_iceberg.catalogs.profiles import (
    CATALOG_TYPES,
    AdlsStorage,
    CatalogProfile,
    GcsStorage,
    GlueCatalog,
    HadoopCatalog,
    HiveCatalog,
    JdbcCatalog,
    LocalStorage,
    OssTablesCatalog,
    PolarisCatalog,
    RestAuth,
    RestCatalog,
    S3Storage,
    S3TablesCatalog,
    Storage,
    UnityCatalog,
)
from kafka_iceberg.catalogs.rendering import AWS_CHECKSUM_JVM_OPTIONS, RenderedCatalog, catalog_properties, render

__all__ = [
    "AWS_CHECKSUM_JVM_OPTIONS",
    "CATALOG_TYPES",
    "AdlsStorage",
    "CatalogProfile",
    "GcsStorage",
    "GlueCatalog",
    "HadoopCatalog",
    "HiveCatalog",
    "JdbcCatalog",
    "LocalStorage",
    "OssTablesCatalog",
    "PolarisCatalog",
    "RenderedCatalog",
    "RestAuth",
    "RestCatalog",
    "S3Storage",
    "S3TablesCatalog",
    "Storage",
    "UnityCatalog",
    "catalog_properties",
    "render",
]
