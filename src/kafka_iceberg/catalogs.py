"""Catalog profiles: a named Iceberg catalog target and how it renders to Spark settings.

Every profile renders to ``spark.sql.catalog.<name>[.key]`` settings only (Hadoop options go
under the catalog's own ``hadoop.`` prefix), so several catalogs with different endpoints live in
one session and can be added to a running session. Values keep their ``${...}`` references until
:mod:`kafka_iceberg.session` resolves them; printing goes through :func:`kafka_iceberg.refs.mask_mapping`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from kafka_iceberg.config import Frozen
from kafka_iceberg.refs import MASK, find_refs, mask_mapping

SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"
GCS_FILE_IO = "org.apache.iceberg.gcp.gcs.GCSFileIO"
ADLS_FILE_IO = "org.apache.iceberg.azure.adlsv2.ADLSFileIO"
S3A_FS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
# Hadoop's defaults retry an unreachable S3 endpoint for many minutes (20 AWS SDK attempts within each
# of 8 S3A tries), which looks like a hung job: each call gives up within seconds instead, and the
# run's outage retry (environment ``outage_retry``) waits for the store to come back.
S3A_ATTEMPTS_MAXIMUM = "hadoop.fs.s3a.attempts.maximum"
S3A_ATTEMPTS_MAXIMUM_DEFAULT = 3
S3A_RETRY_LIMIT = "hadoop.fs.s3a.retry.limit"
S3A_RETRY_LIMIT_DEFAULT = 2
AWS_BUNDLE = "iceberg-aws-bundle"
SIGV4_ENABLED = "rest.sigv4-enabled"  # the key S3 Tables' and OSS Tables' own guides give (seed 000)
# Iceberg 1.10 reads rest.sigv4-enabled as a deprecated alias of rest.auth.type=sigv4; both are set so
# the profile works on older runtimes and after the alias is removed. The signer wraps no other auth.
SIGV4_AUTH = {"rest.auth.type": "sigv4", "rest.auth.sigv4.delegate-auth-type": "none"}
OSS_ARN = re.compile(r"^acs:osstables:[a-z0-9-]+:\d+:bucket/[a-z0-9][a-z0-9-]*$")
S3TABLES_ARN = re.compile(r"^arn:aws[a-z-]*:s3tables:[a-z0-9-]+:\d{12}:bucket/[a-z0-9][a-z0-9-]*$")
UNITY_OAUTH_SCOPE = "all-apis"
# AWS SDK 2.20+ sends aws-chunked uploads that OSS rejects (seed 000): checksums only when required.
AWS_CHECKSUM_JVM_OPTIONS = (
    "-Daws.requestChecksumCalculation=when_required",
    "-Daws.responseChecksumValidation=when_required",
)


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


# -- rendering ----------------------------------------------------------------------------------
@dataclass
class RenderedCatalog:
    """Spark settings of one catalog, references unresolved."""

    name: str
    conf: dict[str, str] = field(default_factory=dict)
    jvm_options: list[str] = field(default_factory=list)
    cluster_jars: list[str] = field(default_factory=list)
    secret_keys: set[str] = field(default_factory=set)

    def key(self, key: str) -> str:
        """The full Spark setting of a catalog property."""
        return f"spark.sql.catalog.{self.name}.{key}" if key else f"spark.sql.catalog.{self.name}"

    def set(self, key: str, value: str | bool | int | None, *, secret: bool = False) -> None:
        """Set ``spark.sql.catalog.<name>.<key>`` (skipped when value is None); ``secret`` values print masked."""
        if value is None:
            return
        text = str(value).lower() if isinstance(value, bool) else str(value)
        self.conf[self.key(key)] = text
        if secret:
            self.secret_keys.add(self.key(key))

    def properties(self) -> dict[str, str]:
        """The catalog properties (``uri``, ``warehouse``, ...) without ``spark.sql.catalog.<name>.``."""
        prefix = self.key("") + "."
        return {k[len(prefix) :]: v for k, v in self.conf.items() if k.startswith(prefix)}

    def masked(self) -> dict[str, str]:
        """The settings as ``plan`` prints them: credentials masked."""
        out = mask_mapping(self.conf)
        out.update({k: MASK for k in self.secret_keys if self.conf.get(k)})
        return out


def _render_storage(out: RenderedCatalog, storage: Storage | None) -> None:
    if storage is None:
        return
    if isinstance(storage, S3Storage):
        if storage.io == "hadoop":
            out.set("io-impl", HADOOP_FILE_IO)
            for scheme in ("s3", "s3a"):
                out.set(f"hadoop.fs.{scheme}.impl", S3A_FS)
            out.set("hadoop.fs.s3a.endpoint", storage.endpoint)
            out.set("hadoop.fs.s3a.endpoint.region", storage.region)
            out.set("hadoop.fs.s3a.path.style.access", storage.path_style)
            if storage.endpoint and storage.endpoint.startswith("http://"):
                out.set("hadoop.fs.s3a.connection.ssl.enabled", False)
            if storage.anonymous:
                out.set(
                    "hadoop.fs.s3a.aws.credentials.provider", "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
                )
            out.set("hadoop.fs.s3a.access.key", storage.access_key_id)
            out.set("hadoop.fs.s3a.secret.key", storage.secret_access_key, secret=True)
            out.set("hadoop.fs.s3a.session.token", storage.session_token, secret=True)
            out.set(S3A_ATTEMPTS_MAXIMUM, S3A_ATTEMPTS_MAXIMUM_DEFAULT)  # catalog `properties` override both
            out.set(S3A_RETRY_LIMIT, S3A_RETRY_LIMIT_DEFAULT)
            return
        out.set("io-impl", S3_FILE_IO)
        out.set("s3.endpoint", storage.endpoint)
        out.set("client.region", storage.region)
        if storage.path_style:
            out.set("s3.path-style-access", True)
        out.set("s3.access-key-id", storage.access_key_id)
        out.set("s3.secret-access-key", storage.secret_access_key, secret=True)
        out.set("s3.session-token", storage.session_token, secret=True)
        if storage.anonymous:
            out.set("s3.remote-signing-enabled", False)
            out.set(
                "client.credentials-provider", "software.amazon.awssdk.auth.credentials.AnonymousCredentialsProvider"
            )
        out.cluster_jars.append(AWS_BUNDLE)
    elif isinstance(storage, GcsStorage):
        out.set("io-impl", GCS_FILE_IO)
        out.set("gcs.project-id", storage.project_id)
        out.set("gcs.oauth2.token", storage.oauth2_token, secret=True)
    elif isinstance(storage, AdlsStorage):
        out.set("io-impl", ADLS_FILE_IO)
        out.set(f"adls.sas-token.{storage.account}.dfs.core.windows.net", storage.sas_token, secret=True)
        if storage.account_key:
            out.set("adls.auth.shared-key.account.name", storage.account)
            out.set("adls.auth.shared-key.account.key", storage.account_key, secret=True)
    else:
        out.set("io-impl", HADOOP_FILE_IO)


def _render_sigv4(
    out: RenderedCatalog, name: str | None, region: str | None, key_id: str | None, secret: str | None
) -> None:
    out.set(SIGV4_ENABLED, True)
    for key, value in SIGV4_AUTH.items():
        out.set(key, value)
    out.set("rest.signing-name", name)
    out.set("rest.signing-region", region)
    out.set("rest.access-key-id", key_id)
    out.set("rest.secret-access-key", secret, secret=True)
    out.cluster_jars.append(AWS_BUNDLE)


def _render_rest_auth(out: RenderedCatalog, auth: RestAuth) -> None:
    if auth.type == "none":
        out.set("rest.auth.type", "none")
    elif auth.type == "bearer":
        out.set("rest.auth.type", "oauth2")  # a static bearer token is OAuth2 auth without a token exchange
        out.set("token", auth.token, secret=True)
    elif auth.type == "oauth2":
        out.set("rest.auth.type", "oauth2")
        out.set("credential", f"{auth.client_id}:{auth.client_secret}", secret=True)
        out.set("scope", auth.scope)
        out.set("oauth2-server-uri", auth.server_uri)
    else:
        _render_sigv4(out, auth.signing_name, auth.signing_region, auth.access_key_id, auth.secret_access_key)


def render(name: str, profile: CatalogProfile) -> RenderedCatalog:
    """Render a profile to ``spark.sql.catalog.<name>.*`` settings.

    Args:
        name: the Spark catalog name (the profile's name in the environment file).
        profile: the validated profile.

    Returns:
        The settings, JVM options the driver needs, and the extra cluster jars (by lock-file name).
    """
    out = RenderedCatalog(name)
    out.set("", SPARK_CATALOG)
    if isinstance(profile, RestCatalog):
        out.set("type", "rest")
        out.set("uri", profile.uri)
        out.set("warehouse", profile.warehouse)
        _render_rest_auth(out, profile.auth)
    elif isinstance(profile, S3TablesCatalog):
        out.set("type", "rest")
        out.set("uri", f"https://s3tables.{profile.region}.amazonaws.com/iceberg")
        out.set("warehouse", profile.table_bucket_arn)
        _render_sigv4(out, "s3tables", profile.region, profile.access_key_id, profile.secret_access_key)
        out.set("io-impl", S3_FILE_IO)
        out.set("client.region", profile.region)
        out.set("rest-metrics-reporting-enabled", False)  # the S3 Tables endpoint takes no metrics reports
    elif isinstance(profile, OssTablesCatalog):
        # Exactly the settings of OSS Tables' Kafka Connect guide (seed 000), plus the sigv4 auth type.
        suffix = "-internal" if profile.network == "internal" else ""
        out.set("type", "rest")
        out.set("uri", profile.uri or f"https://{profile.region}{suffix}.oss-tables.aliyuncs.com/iceberg")
        out.set("warehouse", profile.table_bucket_arn)
        _render_sigv4(out, "osstables", profile.region, profile.access_key_id, profile.secret_access_key)
        # The catalog hands out oss:// locations but storage speaks S3: force S3FileIO.
        out.set("io-impl", S3_FILE_IO)
        out.set("s3.endpoint", profile.s3_endpoint or f"https://oss-{profile.region}{suffix}.aliyuncs.com")
        out.set("s3.access-key-id", profile.access_key_id)
        out.set("s3.secret-access-key", profile.secret_access_key, secret=True)
        out.set("s3.path-style-access", True)
        out.set("client.region", profile.region)
        out.jvm_options.extend(AWS_CHECKSUM_JVM_OPTIONS)
    elif isinstance(profile, PolarisCatalog):
        out.set("type", "rest")
        out.set("uri", profile.uri)
        out.set("warehouse", profile.warehouse)
        out.set("rest.auth.type", "oauth2")
        out.set("credential", f"{profile.client_id}:{profile.client_secret}", secret=True)
        out.set("scope", profile.scope)
        out.set("oauth2-server-uri", profile.oauth2_server_uri or f"{profile.uri.rstrip('/')}/v1/oauth/tokens")
        if profile.vended_credentials:
            out.set("header.X-Iceberg-Access-Delegation", "vended-credentials")
    elif isinstance(profile, UnityCatalog):
        workspace = profile.workspace_url.rstrip("/")
        out.set("type", "rest")
        out.set("uri", f"{workspace}/api/2.1/unity-catalog/iceberg-rest")
        out.set("warehouse", profile.catalog)
        out.set("rest.auth.type", "oauth2")
        if profile.token:
            out.set("token", profile.token, secret=True)
        else:
            out.set("credential", f"{profile.client_id}:{profile.client_secret}", secret=True)
            out.set("oauth2-server-uri", f"{workspace}/oidc/v1/token")
            out.set("scope", UNITY_OAUTH_SCOPE)
        out.set("header.X-Iceberg-Access-Delegation", "vended-credentials")
    elif isinstance(profile, GlueCatalog):
        out.set("type", "glue")
        out.set("warehouse", profile.warehouse)
        out.set("glue.id", profile.catalog_id)
        out.set("client.region", profile.region)
        out.set("io-impl", S3_FILE_IO)
        out.cluster_jars.append(AWS_BUNDLE)
    elif isinstance(profile, HiveCatalog):
        out.set("type", "hive")
        out.set("uri", profile.uri)
        out.set("warehouse", profile.warehouse)
    elif isinstance(profile, HadoopCatalog):
        out.set("type", "hadoop")
        out.set("warehouse", profile.warehouse)
    else:
        out.set("type", "jdbc")
        out.set("uri", profile.uri)
        out.set("warehouse", profile.warehouse)
        out.set("jdbc.user", profile.user)
        out.set("jdbc.password", profile.password, secret=True)
    _render_storage(out, profile.storage)
    for key, value in profile.properties.items():
        out.set(key, value)
    out.cluster_jars = list(dict.fromkeys(out.cluster_jars))
    return out
