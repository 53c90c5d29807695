"""The local stack's object store, read straight (not through a catalog): what files are really there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyarrow import fs


def object_store(status: Mapping[str, Any]) -> fs.S3FileSystem:
    """The stack's S3 store, from ``local status --json``."""
    s3 = status["s3"]
    return fs.S3FileSystem(
        access_key=s3["access_key_id"], secret_key=s3["secret_access_key"],
        endpoint_override=s3["endpoint"], scheme="http", region=s3["region"],
    )  # fmt: skip


def files_under(status: Mapping[str, Any], location: str) -> list[str]:
    """Every object under ``location`` (``s3://bucket/prefix``), as ``bucket/key`` paths, sorted."""
    prefix = location.split("://", 1)[1].rstrip("/")
    infos = object_store(status).get_file_info(fs.FileSelector(prefix, recursive=True, allow_not_found=True))
    return sorted(i.path for i in infos if i.type == fs.FileType.File)
