"""Catalog profiles rendered to Spark settings: one renderer per catalog type, chosen from a table.

Every profile renders to ``spark.sql.catalog.<name>[.key]`` settings only (Hadoop options go
under the catalog's own ``hadoop.`` prefix), so several catalogs with different endpoints live in
one session and can be added to a running session. Values keep their ``${...}`` references until
the run resolves them (:mod:`kafka_iceberg.run.settings`); printing goes through
:func:`kafka_iceberg.refs.mask_mapping`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_iceberg.catalogs.profiles import (
    AdlsStorage,
    CatalogProfile,
    GcsStorage,
    GlueCatalog,
    HadoopCatalog,
    HiveCatalog,
    JdbcCatalog,
    OssTablesCatalog,
    PolarisCatalog,
    RestAuth,
    RestCatalog,
    S3Storage,
    S3TablesCatalog,
    Storage,
    UnityCatalog,
)
from kafka_iceberg.refs import MASK, is_sensitive, mask_mapping

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
UNITY_OAUTH_SCOPE = "all-apis"
# AWS SDK 2.20+ sends aws-chunked uploads that OSS rejects (seed 000): checksums only when required.
AWS_CHECKSUM_JVM_OPTIONS = (
    "-Daws.requestChecksumCalculation=when_required",
    "-Daws.responseChecksumValidation=when_required",
)


# -- rendering ----------------------------------------------------------------------------------
def catalog_properties(name: str, conf: Mapping[str, str]) -> dict[str, str]:
    """Catalog ``name``'s properties (``uri``, ``warehouse``, ...) in its Spark settings ``conf``.

    ``conf`` may be rendered (references kept) or resolved: the run's settings hold the latter.
    """
    prefix = f"spark.sql.catalog.{name}."
    return {k[len(prefix) :]: v for k, v in conf.items() if k.startswith(prefix)}


@dataclass
class RenderedCatalog:
    """Spark settings of one catalog, references unresolved."""

    name: str
    conf: dict[str, str] = field(default_factory=dict)
    jvm_options: list[str] = field(default_factory=list)
    cluster_jars: list[str] = field(default_factory=list)
    secret_keys: set[str] = field(default_factory=set)  # credentials: masked in print, dropped once loaded

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
        return catalog_properties(self.name, self.conf)

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


def _rest(out: RenderedCatalog, profile: RestCatalog) -> None:
    out.set("type", "rest")
    out.set("uri", profile.uri)
    out.set("warehouse", profile.warehouse)
    _render_rest_auth(out, profile.auth)


def _s3tables(out: RenderedCatalog, profile: S3TablesCatalog) -> None:
    out.set("type", "rest")
    out.set("uri", f"https://s3tables.{profile.region}.amazonaws.com/iceberg")
    out.set("warehouse", profile.table_bucket_arn)
    _render_sigv4(out, "s3tables", profile.region, profile.access_key_id, profile.secret_access_key)
    out.set("io-impl", S3_FILE_IO)
    out.set("client.region", profile.region)
    out.set("rest-metrics-reporting-enabled", False)  # the S3 Tables endpoint takes no metrics reports


def _osstables(out: RenderedCatalog, profile: OssTablesCatalog) -> None:
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


def _polaris(out: RenderedCatalog, profile: PolarisCatalog) -> None:
    out.set("type", "rest")
    out.set("uri", profile.uri)
    out.set("warehouse", profile.warehouse)
    out.set("rest.auth.type", "oauth2")
    out.set("credential", f"{profile.client_id}:{profile.client_secret}", secret=True)
    out.set("scope", profile.scope)
    out.set("oauth2-server-uri", profile.oauth2_server_uri or f"{profile.uri.rstrip('/')}/v1/oauth/tokens")
    if profile.vended_credentials:
        out.set("header.X-Iceberg-Access-Delegation", "vended-credentials")


def _unity(out: RenderedCatalog, profile: UnityCatalog) -> None:
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


def _glue(out: RenderedCatalog, profile: GlueCatalog) -> None:
    out.set("type", "glue")
    out.set("warehouse", profile.warehouse)
    out.set("glue.id", profile.catalog_id)
    out.set("client.region", profile.region)
    out.set("io-impl", S3_FILE_IO)
    out.cluster_jars.append(AWS_BUNDLE)


def _hive(out: RenderedCatalog, profile: HiveCatalog) -> None:
    out.set("type", "hive")
    out.set("uri", profile.uri)
    out.set("warehouse", profile.warehouse)


def _hadoop(out: RenderedCatalog, profile: HadoopCatalog) -> None:
    out.set("type", "hadoop")
    out.set("warehouse", profile.warehouse)


def _jdbc(out: RenderedCatalog, profile: JdbcCatalog) -> None:
    out.set("type", "jdbc")
    out.set("uri", profile.uri)
    out.set("warehouse", profile.warehouse)
    out.set("jdbc.user", profile.user)
    out.set("jdbc.password", profile.password, secret=True)


# One renderer per catalog type: the profile's ``type`` picks it.
_RENDERERS: dict[str, Callable[[RenderedCatalog, Any], None]] = {
    "rest": _rest,
    "s3tables": _s3tables,
    "osstables": _osstables,
    "polaris": _polaris,
    "unity": _unity,
    "glue": _glue,
    "hive": _hive,
    "hadoop": _hadoop,
    "jdbc": _jdbc,
}


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
    _RENDERERS[profile.type](out, profile)
    _render_storage(out, profile.storage)
    for key, value in profile.properties.items():
        out.set(key, value)
    # Judged by the property, not the catalog's name ("tokens" is a name).
    out.secret_keys |= {
        out.key(prop) for prop, raw in catalog_properties(name, out.conf).items() if raw and is_sensitive(prop, raw)
    }
    out.cluster_jars = list(dict.fromkeys(out.cluster_jars))
    return out
