"""Independent read path into the local stack: pyiceberg for tables, confluent-kafka for topics.

Tests and the demo read results through these, never through the Spark session that wrote them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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
