"""Catalog profiles render to exactly the Spark settings each catalog type and preset needs.

Every case is pinned by a golden file (``golden/<case>.json``: settings, masked settings, JVM
options, cluster jars). Regenerate after an intended change with
``KAFKA_ICEBERG_UPDATE_GOLDEN=1 pytest tests/write/test_catalogs.py`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from kafka_iceberg.catalogs import (
    AWS_CHECKSUM_JVM_OPTIONS,
    CATALOG_TYPES,
    CatalogProfile,
    RenderedCatalog,
    render,
)
from kafka_iceberg.refs import MASK

GOLDEN = Path(__file__).with_name("golden")
PROFILE = TypeAdapter(CatalogProfile)

CASES: dict[str, dict[str, Any]] = {
    "rest_none": {"type": "rest", "uri": "http://127.0.0.1:8181", "warehouse": "s3://warehouse"},
    "rest_bearer": {
        "type": "rest",
        "uri": "https://catalog.example.com/api/catalog",
        "warehouse": "analytics",
        "auth": {"type": "bearer", "token": "${secret:lake/token}"},
    },
    "rest_oauth2": {
        "type": "rest",
        "uri": "https://catalog.example.com/api/catalog",
        "warehouse": "analytics",
        "auth": {
            "type": "oauth2",
            "client_id": "${env:CLIENT_ID}",
            "client_secret": "${secret:lake/client_secret}",
            "scope": "catalog",
            "server_uri": "https://auth.example.com/oauth/token",
        },
    },
    "rest_sigv4": {
        "type": "rest",
        "uri": "https://glue.us-east-1.amazonaws.com/iceberg",
        "warehouse": "123456789012:s3tablescatalog/bucket",
        "auth": {"type": "sigv4", "signing_name": "glue", "signing_region": "us-east-1"},
        "storage": {"type": "s3", "region": "us-east-1"},
    },
    "s3tables": {
        "type": "s3tables",
        "region": "us-east-1",
        "table_bucket_arn": "arn:aws:s3tables:us-east-1:123456789012:bucket/lake",
    },
    "s3tables_keys": {
        "type": "s3tables",
        "region": "eu-west-1",
        "table_bucket_arn": "${env:S3TABLES_BUCKET_ARN}",
        "access_key_id": "${env:AWS_ACCESS_KEY_ID}",
        "secret_access_key": "${secret:lake/aws_secret}",
    },
    "osstables": {
        "type": "osstables",
        "region": "cn-hangzhou",
        "table_bucket_arn": "acs:osstables:cn-hangzhou:1234567890123456:bucket/lake",
        "access_key_id": "${secret:oss/access_key_id}",
        "secret_access_key": "${secret:oss/access_key_secret}",
    },
    "osstables_public": {
        "type": "osstables",
        "region": "cn-shanghai",
        "network": "public",
        "table_bucket_arn": "${env:OSS_TABLE_BUCKET_ARN}",
        "access_key_id": "${env:OSS_AK}",
        "secret_access_key": "${env:OSS_SK}",
    },
    "polaris": {
        "type": "polaris",
        "uri": "http://polaris:8181/api/catalog",
        "warehouse": "lake",
        "client_id": "${secret:polaris/client_id}",
        "client_secret": "${secret:polaris/client_secret}",
    },
    "unity_token": {
        "type": "unity",
        "workspace_url": "https://dbc-1234.cloud.databricks.com/",
        "catalog": "main",
        "token": "${secret:unity/token}",
    },
    "unity_oauth": {
        "type": "unity",
        "workspace_url": "https://dbc-1234.cloud.databricks.com",
        "catalog": "main",
        "client_id": "${env:SP_CLIENT_ID}",
        "client_secret": "${secret:unity/sp_secret}",
    },
    "glue": {"type": "glue", "warehouse": "s3://lake/warehouse", "region": "us-west-2", "catalog_id": "123456789012"},
    "hive": {"type": "hive", "uri": "thrift://metastore:9083", "warehouse": "s3a://lake/warehouse"},
    "hadoop": {"type": "hadoop", "warehouse": "file:///tmp/warehouse", "storage": {"type": "local"}},
    "jdbc": {
        "type": "jdbc",
        "uri": "jdbc:postgresql://db:5432/iceberg",
        "warehouse": "s3://lake/warehouse",
        "user": "${env:PGUSER}",
        "password": "${secret:db/password}",
    },
    "storage_s3_s3fileio": {
        "type": "rest",
        "uri": "http://catalog:8181",
        "storage": {
            "type": "s3",
            "endpoint": "https://minio:9000",
            "region": "us-east-1",
            "path_style": True,
            "access_key_id": "${env:AWS_ACCESS_KEY_ID}",
            "secret_access_key": "${env:AWS_SECRET_ACCESS_KEY}",
            "session_token": "${env:AWS_SESSION_TOKEN}",
        },
    },
    "storage_s3_anonymous": {
        "type": "rest",
        "uri": "http://catalog:8181",
        "storage": {"type": "s3", "endpoint": "http://127.0.0.1:8333", "path_style": True, "anonymous": True},
    },
    "storage_s3_hadoop": {
        "type": "rest",
        "uri": "${local:catalog.uri}",
        "warehouse": "${local:catalog.warehouse}",
        "storage": {
            "type": "s3",
            "endpoint": "${local:s3.endpoint}",
            "region": "${local:s3.region}",
            "path_style": True,
            "anonymous": True,
            "io": "hadoop",
        },
    },
    "storage_s3_hadoop_keys": {
        "type": "hive",
        "uri": "thrift://metastore:9083",
        "storage": {
            "type": "s3",
            "endpoint": "https://s3.eu-central-1.amazonaws.com",
            "region": "eu-central-1",
            "io": "hadoop",
            "access_key_id": "${env:AWS_ACCESS_KEY_ID}",
            "secret_access_key": "${secret:aws/secret}",
        },
    },
    "storage_gcs": {
        "type": "rest",
        "uri": "https://biglake.googleapis.com/iceberg/v1/restcatalog",
        "warehouse": "gs://lake",
        "storage": {"type": "gcs", "project_id": "my-project", "oauth2_token": "${secret:gcp/token}"},
    },
    "storage_adls": {
        "type": "rest",
        "uri": "https://catalog.example.com",
        "warehouse": "abfss://lake@acct.dfs.core.windows.net/warehouse",
        "storage": {
            "type": "adls",
            "account": "acct",
            "sas_token": "${secret:azure/sas}",
            "account_key": "${secret:azure/key}",
        },
    },
    "storage_local": {
        "type": "jdbc",
        "uri": "jdbc:sqlite:/tmp/catalog.db",
        "warehouse": "file:///tmp/wh",
        "storage": {"type": "local"},
    },
}


def _rendered(case: str) -> RenderedCatalog:
    return render("lake", PROFILE.validate_python(CASES[case]))


def _snapshot(out: RenderedCatalog) -> dict[str, Any]:
    return {
        "conf": dict(sorted(out.conf.items())),
        "masked": dict(sorted(out.masked().items())),
        "jvm_options": out.jvm_options,
        "cluster_jars": out.cluster_jars,
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_profile_renders_as_its_golden_file(case):
    got = _snapshot(_rendered(case))
    path = GOLDEN / f"{case}.json"
    if os.environ.get("KAFKA_ICEBERG_UPDATE_GOLDEN") == "1":
        path.write_text(json.dumps({"profile": CASES[case], **got}, indent=2) + "\n")
    expected = json.loads(path.read_text())
    assert expected["profile"] == CASES[case], "golden file is for another profile: regenerate it"
    assert got == {k: expected[k] for k in got}


def test_every_catalog_type_and_storage_has_a_case():
    types = {c["type"] for c in CASES.values()}
    assert types == set(CATALOG_TYPES)
    storages = {(c["storage"]["type"], c["storage"].get("io", "")) for c in CASES.values() if "storage" in c}
    assert storages >= {("s3", ""), ("s3", "hadoop"), ("gcs", ""), ("adls", ""), ("local", "")}


def test_osstables_renders_the_exact_settings_of_the_kafka_connect_guide():
    """Seed 000: every ``iceberg.catalog.*`` key of OSS Tables' guide, with its exact value."""
    profile = PROFILE.validate_python(
        {
            "type": "osstables",
            "region": "cn-hangzhou",
            "table_bucket_arn": "acs:osstables:cn-hangzhou:1234567890123456:bucket/lake",
            "access_key_id": "AKID",
            "secret_access_key": "SECRET",
        }
    )
    props = render("oss", profile).properties()
    guide = {
        "type": "rest",
        "uri": "https://cn-hangzhou-internal.oss-tables.aliyuncs.com/iceberg",
        "rest.sigv4-enabled": "true",
        "rest.signing-region": "cn-hangzhou",
        "warehouse": "acs:osstables:cn-hangzhou:1234567890123456:bucket/lake",
        "rest.signing-name": "osstables",
        "rest.access-key-id": "AKID",
        "rest.secret-access-key": "SECRET",
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": "https://oss-cn-hangzhou-internal.aliyuncs.com",
        "s3.access-key-id": "AKID",
        "s3.secret-access-key": "SECRET",
        "s3.path-style-access": "true",
        "client.region": "cn-hangzhou",
    }
    assert {k: props.get(k) for k in guide} == guide
    # Beyond the guide only the non-deprecated spelling of the same auth (Iceberg 1.10) is added.
    assert set(props) - set(guide) == {"rest.auth.type", "rest.auth.sigv4.delegate-auth-type"}
    assert props["rest.auth.type"] == "sigv4"
    out = render("oss", profile)
    assert out.conf["spark.sql.catalog.oss"] == "org.apache.iceberg.spark.SparkCatalog"
    assert (
        out.jvm_options
        == list(AWS_CHECKSUM_JVM_OPTIONS)
        == [
            "-Daws.requestChecksumCalculation=when_required",
            "-Daws.responseChecksumValidation=when_required",
        ]
    )


def test_s3tables_signs_as_s3tables_against_the_regional_endpoint():
    props = _rendered("s3tables").properties()
    assert props["uri"] == "https://s3tables.us-east-1.amazonaws.com/iceberg"
    assert props["warehouse"] == "arn:aws:s3tables:us-east-1:123456789012:bucket/lake"
    assert (props["rest.sigv4-enabled"], props["rest.signing-name"], props["rest.signing-region"]) == (
        "true",
        "s3tables",
        "us-east-1",
    )
    assert "rest.access-key-id" not in props  # the cluster's default AWS credential chain


@pytest.mark.parametrize("case", sorted(CASES))
def test_printing_masks_every_credential(case):
    out = _rendered(case)
    masked = out.masked()
    for key in out.secret_keys:
        assert masked[key] == MASK
    for key, value in masked.items():
        if any(word in key for word in ("secret", "password", "token", "credential", "account.key")):
            if key.endswith("credentials.provider"):
                assert value == out.conf[key], key  # a provider class name is no credential: shown as is
            else:
                assert value == MASK, key


def test_literal_credentials_are_masked_too():
    out = render(
        "lake",
        PROFILE.validate_python(
            {**CASES["rest_oauth2"], "auth": {"type": "oauth2", "client_id": "me", "client_secret": "hunter2"}}
        ),
    )
    assert out.conf["spark.sql.catalog.lake.credential"] == "me:hunter2"
    assert "hunter2" not in json.dumps(out.masked())


@pytest.mark.parametrize(
    ("profile", "complaint"),
    [
        ({"type": "rest", "uri": "u", "auth": {"type": "bearer"}}, "auth.token"),
        ({"type": "rest", "uri": "u", "auth": {"type": "oauth2", "client_id": "x"}}, "client_secret"),
        ({"type": "rest", "uri": "u", "auth": {"type": "sigv4"}}, "signing_region"),
        ({"type": "s3tables", "region": "us-east-1", "table_bucket_arn": "my-bucket"}, "arn:aws:s3tables"),
        ({**CASES["osstables"], "table_bucket_arn": "arn:aws:s3tables:x"}, "acs:osstables"),
        ({"type": "unity", "workspace_url": "w", "catalog": "c"}, "either token"),
        (
            {
                "type": "unity",
                "workspace_url": "w",
                "catalog": "c",
                "token": "t",
                "client_id": "i",
                "client_secret": "s",
            },
            "either token",
        ),
        ({"type": "jdbc", "uri": "postgresql://db", "warehouse": "w"}, "jdbc:"),
    ],
)
def test_incomplete_profiles_are_refused(profile, complaint):
    with pytest.raises(ValidationError, match=complaint):
        PROFILE.validate_python(profile)
