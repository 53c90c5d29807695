"""The catalog profile of the local stack, equal to the ``lake`` profile of ``environments/local.yml``."""

from __future__ import annotations

from kafka_iceberg.catalogs import RestAuth, RestCatalog, S3Storage

LOCAL_CATALOG = "lake"


def local_catalog_profile() -> RestCatalog:
    """SeaweedFS's REST catalog with anonymous S3 through Hadoop S3A (see ENVIRONMENT notes in the README)."""
    return RestCatalog(
        type="rest",
        uri="${local:catalog.uri}",
        warehouse="${local:catalog.warehouse}",
        auth=RestAuth(type="none"),
        storage=S3Storage(
            type="s3",
            endpoint="${local:s3.endpoint}",
            region="${local:s3.region}",
            path_style=True,
            anonymous=True,
            io="hadoop",
        ),
    )
