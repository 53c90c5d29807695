"""Catalog profiles: the named Iceberg catalog targets an environment file declares (validated models)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from kafka_iceberg.config import Frozen
from kafka_iceberg.refs import find_refs

OSS_ARN = re.compile(r"^acs:osstables:[a-z0-9-]+:\d+:bucket/[a-z0-9][a-z0-9-]*$")
S3TABLES_ARN = re.compile(r"^arn:aws[a-z-]*:s3tables:[a-z0-9-]+:\d{12}:bucket/[a-z0-9][a-z0-9-]*$")


# -- storage ------------------------------------------------------------------------------------
class S3Storage(Frozen):
    """S3 or an S3-compatible store (OSS, SeaweedFS, MinIO)."""

    type: Literal["s3"]
    endpoint: str | None = None
    region: str | None = None
    path_style: bool = False
    access_key_id: str | None = None
    secret_access_key: str | None = Field(default=None, repr=False)
    session_token: str | None = Field(default=None, repr=False)
    anonymous: bool = False
    # s3fileio: Iceberg's S3FileIO (clusters, needs iceberg-aws-bundle); hadoop: Hadoop S3A (local runtime).
    io: Literal["s3fileio", "hadoop"] = "s3fileio"


class GcsStorage(Frozen):
    """Google Cloud Storage through Iceberg's GCSFileIO."""

    type: Literal["gcs"]
    project_id: str | None = None
    oauth2_token: str | None = None


class AdlsStorage(Frozen):
    """Azure Data Lake Storage Gen2 through Iceberg's ADLSFileIO."""

    type: Literal["adls"]
    account: str
    sas_token: str | None = Field(default=None, repr=False)
    account_key: str | None = Field(default=None, repr=False)


class LocalStorage(Frozen):
    """Local or Hadoop-compatible paths (``file:``, ``hdfs:``, ``dbfs:``): Hadoop's FileIO."""

    type: Literal["local"]


Storage = Annotated[S3Storage | GcsStorage | AdlsStorage | LocalStorage, Field(discriminator="type")]


# -- catalogs -----------------------------------------------------------------------------------
class _Profile(Frozen):
    storage: Storage | None = None
    properties: dict[str, str] = Field(default_factory=dict)


class RestAuth(Frozen):
    """How a REST catalog authenticates requests."""

    type: Literal["none", "bearer", "oauth2", "sigv4"] = "none"
    token: str | None = Field(default=None, repr=False)
    client_id: str | None = None
    client_secret: str | None = Field(default=None, repr=False)
    scope: str | None = None
    server_uri: str | None = None
    signing_name: str | None = None
    signing_region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _complete(self) -> RestAuth:
        if self.type == "bearer" and not self.token:
            raise ValueError("auth.token for auth type bearer")
        if self.type == "oauth2" and not (self.client_id and self.client_secret):
            raise ValueError("auth.client_id and auth.client_secret for auth type oauth2")
        if self.type == "sigv4":
            if not self.signing_region:
                raise ValueError("auth.signing_region for auth type sigv4")
            if bool(self.access_key_id) != bool(self.secret_access_key):
                raise ValueError("both auth.access_key_id and auth.secret_access_key, or neither (default AWS chain)")
        return self


def _arn(value: str, pattern: re.Pattern[str], expected: str) -> str:
    if not find_refs(value) and not pattern.match(value):
        raise ValueError(expected)
    return value


class RestCatalog(_Profile):
    """Any Iceberg REST catalog."""

    type: Literal["rest"]
    uri: str
    warehouse: str | None = None
    auth: RestAuth = Field(default_factory=RestAuth)


class S3TablesCatalog(_Profile):
    """AWS S3 Tables through its Iceberg REST endpoint, SigV4-signed as ``s3tables``."""

    type: Literal["s3tables"]
    region: str
    table_bucket_arn: str
    access_key_id: str | None = None
    secret_access_key: str | None = Field(default=None, repr=False)

    @field_validator("table_bucket_arn")
    @classmethod
    def _bucket_arn(cls, value: str) -> str:
        return _arn(value, S3TABLES_ARN, "a table bucket ARN, arn:aws:s3tables:<region>:<account>:bucket/<name>")


class OssTablesCatalog(_Profile):
    """Alibaba Cloud OSS Tables: REST with SigV4 signing name ``osstables``, S3FileIO on OSS."""

    type: Literal["osstables"]
    region: str
    table_bucket_arn: str
    access_key_id: str
    secret_access_key: str = Field(repr=False)
    network: Literal["internal", "public"] = "internal"
    uri: str | None = None
    s3_endpoint: str | None = None

    @field_validator("table_bucket_arn")
    @classmethod
    def _bucket_arn(cls, value: str) -> str:
        return _arn(value, OSS_ARN, "a table bucket ARN, acs:osstables:<region>:<account>:bucket/<name>")


class PolarisCatalog(_Profile):
    """Apache Polaris: REST with OAuth2 client credentials."""

    type: Literal["polaris"]
    uri: str
    warehouse: str
    client_id: str
    client_secret: str = Field(repr=False)
    scope: str = "PRINCIPAL_ROLE:ALL"
    oauth2_server_uri: str | None = None
    vended_credentials: bool = True


class UnityCatalog(_Profile):
    """Databricks Unity Catalog's Iceberg REST endpoint: a token, or OAuth M2M with a service principal."""

    type: Literal["unity"]
    workspace_url: str
    catalog: str
    token: str | None = Field(default=None, repr=False)
    client_id: str | None = None
    client_secret: str | None = Field(default=None, repr=False)

    @model_validator(mode="after")
    def _one_auth(self) -> UnityCatalog:
        oauth = bool(self.client_id and self.client_secret)
        if bool(self.token) == oauth or bool(self.client_id) != bool(self.client_secret):
            raise ValueError("either token, or client_id and client_secret (a service principal's OAuth secret)")
        return self


class GlueCatalog(_Profile):
    """AWS Glue Data Catalog."""

    type: Literal["glue"]
    warehouse: str
    region: str | None = None
    catalog_id: str | None = None


class HiveCatalog(_Profile):
    """A Hive metastore."""

    type: Literal["hive"]
    uri: str
    warehouse: str | None = None


class HadoopCatalog(_Profile):
    """A catalog kept as files under a warehouse path (no catalog server)."""

    type: Literal["hadoop"]
    warehouse: str


class JdbcCatalog(_Profile):
    """A catalog kept in a relational database over JDBC (SQLite, PostgreSQL, MySQL)."""

    type: Literal["jdbc"]
    uri: str
    warehouse: str
    user: str | None = None
    password: str | None = Field(default=None, repr=False)

    @field_validator("uri")
    @classmethod
    def _jdbc_uri(cls, value: str) -> str:
        if not value.startswith(("jdbc:", "${")):
            raise ValueError("a JDBC URL starting with 'jdbc:'")
        return value


CatalogProfile = Annotated[
    RestCatalog
    | S3TablesCatalog
    | OssTablesCatalog
    | PolarisCatalog
    | UnityCatalog
    | GlueCatalog
    | HiveCatalog
    | HadoopCatalog
    | JdbcCatalog,
    Field(discriminator="type"),
]
CATALOG_TYPES = ("rest", "s3tables", "osstables", "polaris", "unity", "glue", "hive", "hadoop", "jdbc")
