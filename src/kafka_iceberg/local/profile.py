"""The catalog profile of the local stack, equal to the ``lake`` profile of ``environments/local.yml``."""

from __future__ import annotations

from kafka_iceberg.catalogs import RestAuth, RestCatalog, S3Storage

LOCAL_CATALOG = "lake"


def local_catalog_profile() -> RestCatalog:
    """SeaweedFS's REST catalog, SigV4-signed, with Iceberg's S3FileIO: what clusters use for S3 Tables."""
    return RestCatalog(
        type="rest",
        uri="${local:catalog.uri}",
        warehouse="${local:catalog.warehouse}",
        auth=RestAuth(
            type="sigv4",
            signing_name="s3tables",
            signing_region="${local:s3.region}",
            access_key_id="${local:s3.access_key_id}",
            secret_access_key="${local:s3.secret_access_key}",
        ),
        storage=S3Storage(
            type="s3",
            endpoint="${local:s3.endpoint}",
            region="${local:s3.region}",
            path_style=True,
            access_key_id="${local:s3.access_key_id}",
            secret_access_key="${local:s3.secret_access_key}",
        ),
    )
