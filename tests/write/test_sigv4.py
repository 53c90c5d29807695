"""The rendered SigV4 settings are the ones a signed Iceberg REST catalog needs.

SeaweedFS runs with credentials, so its catalog refuses anything unsigned, like S3 Tables and OSS
Tables do (it checks the signature and the keys, not the signing name). pyiceberg, which reads the
same property names, talks to a stack of its own here; Spark, with iceberg-aws-bundle as on
clusters, signs the presets' requests against the session's stack.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pytest

from kafka_iceberg.catalogs import RenderedCatalog, RestAuth, RestCatalog, S3Storage, S3TablesCatalog, render
from kafka_iceberg.local.stack import REGION, LocalStack, StackState

pytestmark = pytest.mark.integration

KEY_ID, SECRET = "AKIDKAFKAICEBERG", "sigv4-test-secret"
# Iceberg Java names the REST signer's keys rest.*; pyiceberg's signer reads client.*.
_PYICEBERG_NAMES = {"rest.access-key-id": "client.access-key-id", "rest.secret-access-key": "client.secret-access-key"}
_JAVA_ONLY = ("io-impl",)


def pyiceberg_properties(rendered: RenderedCatalog) -> dict[str, str]:
    """The rendered catalog properties, spelled for pyiceberg."""
    props = rendered.properties()
    return {_PYICEBERG_NAMES.get(k, k): v for k, v in props.items() if k not in _JAVA_ONLY}


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackState]:
    local = LocalStack(tmp_path_factory.mktemp("signed"), s3_credentials=(KEY_ID, SECRET), services=("seaweedfs",))
    state = local.up(owned=True)
    yield state
    local.down()


def _storage(state: StackState) -> S3Storage:
    return S3Storage(
        type="s3",
        endpoint=state.s3_endpoint,
        region=REGION,
        path_style=True,
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
    )


def _catalog(name: str, props: Mapping[str, str]) -> Any:
    import os

    from pyiceberg.catalog import load_catalog

    os.environ.setdefault("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
    catalog = load_catalog(name, **props)
    deadline = time.monotonic() + 15
    while True:  # SeaweedFS creates its table bucket a moment after it starts answering
        try:
            catalog.list_namespaces()
            return catalog
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _round_trip(catalog: Any) -> list[dict[str, Any]]:
    ns = f"sig_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.events", schema=pa.schema([("id", pa.int64()), ("v", pa.string())]))
    table.append(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    return sorted(catalog.load_table(f"{ns}.events").scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def test_rest_sigv4_profile_creates_writes_and_reads_a_signed_catalog(signed):
    profile = RestCatalog(
        type="rest",
        uri=signed.catalog_uri,
        warehouse="s3://warehouse",
        auth=RestAuth(
            type="sigv4", signing_name="s3tables", signing_region=REGION, access_key_id=KEY_ID, secret_access_key=SECRET
        ),
        storage=_storage(signed),
    )
    props = pyiceberg_properties(render("signed", profile))
    assert (props["rest.sigv4-enabled"], props["rest.signing-name"], props["rest.signing-region"]) == (
        "true",
        "s3tables",
        REGION,
    )
    assert _round_trip(_catalog("signed", props)) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


def test_the_s3tables_preset_settings_work_against_a_signed_catalog(signed):
    """The preset's settings unchanged except the endpoint (``properties`` override) and local storage."""
    profile = S3TablesCatalog(
        type="s3tables",
        region=REGION,
        table_bucket_arn="arn:aws:s3tables:us-east-1:000000000000:bucket/warehouse",
        access_key_id=KEY_ID,
        secret_access_key=SECRET,
        properties={"uri": signed.catalog_uri},
        storage=_storage(signed),
    )
    props = pyiceberg_properties(render("s3t", profile))
    assert props["warehouse"].startswith("arn:aws:s3tables:") and props["rest.signing-name"] == "s3tables"
    assert _round_trip(_catalog("s3t", props)) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


def test_unsigned_or_wrongly_signed_requests_are_refused(signed):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import ForbiddenError

    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(f"{signed.catalog_uri}/v1/namespaces", timeout=5)
    assert raw.value.code == 403
    anonymous = load_catalog(
        "anon", type="rest", uri=signed.catalog_uri, warehouse="s3://warehouse", auth={"type": "noop"}
    )
    with pytest.raises(ForbiddenError):
        anonymous.list_namespaces()
    profile = RestCatalog(
        type="rest",
        uri=signed.catalog_uri,
        warehouse="s3://warehouse",
        auth=RestAuth(
            type="sigv4",
            signing_name="s3tables",
            signing_region=REGION,
            access_key_id=KEY_ID,
            secret_access_key="not-the-secret",
        ),
    )
    wrong = load_catalog("wrong", **pyiceberg_properties(render("wrong", profile)))
    with pytest.raises(ForbiddenError, match="signature"):
        wrong.list_namespaces()


@pytest.mark.parametrize("preset", ["s3tables", "osstables"])
def test_spark_signs_the_presets_catalog_requests_and_writes_through_s3fileio(preset, spark, stack):
    """The presets' settings as clusters get them, from Spark: SigV4-signed REST calls and S3FileIO
    writes against the local stack, which verifies both signatures (its own credentials)."""
    from kafka_iceberg.catalogs import OssTablesCatalog
    from kafka_iceberg.refs import Resolver
    from kafka_iceberg.session import attach_catalogs

    storage = S3Storage(
        type="s3",
        endpoint=stack.s3_endpoint,
        region=REGION,
        path_style=True,
        access_key_id=stack.s3_access_key_id,
        secret_access_key=stack.s3_secret_access_key,
    )
    name = f"{preset}_spark"
    if preset == "s3tables":
        profile: Any = S3TablesCatalog(
            type="s3tables",
            region=REGION,
            table_bucket_arn="arn:aws:s3tables:us-east-1:000000000000:bucket/warehouse",
            access_key_id=stack.s3_access_key_id,
            secret_access_key=stack.s3_secret_access_key,
            properties={"uri": stack.catalog_uri},
            storage=storage,
        )
    else:
        profile = OssTablesCatalog(
            type="osstables",
            region=REGION,
            table_bucket_arn="acs:osstables:us-east-1:1234567890:bucket/warehouse",
            access_key_id=stack.s3_access_key_id,
            secret_access_key=stack.s3_secret_access_key,
            uri=stack.catalog_uri,
            s3_endpoint=stack.s3_endpoint,
        )
    rendered = render(name, profile)
    props = rendered.properties()
    assert props["io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert (props["rest.sigv4-enabled"], props["rest.signing-name"]) == ("true", preset)
    attach_catalogs(spark, [rendered], Resolver(env={}))
    ns = f"sig_{preset}_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE {name}.{ns}")
    spark.sql(f"CREATE TABLE {name}.{ns}.events (id BIGINT, v STRING) USING iceberg PARTITIONED BY (bucket(4, v))")
    spark.sql(f"INSERT INTO {name}.{ns}.events VALUES (1, 'a'), (2, 'b')")
    # Read back independently: pyiceberg, signed with the same credentials.
    catalog = _catalog(
        f"{name}_reader", pyiceberg_properties(render(name, profile)) | {"s3.endpoint": stack.s3_endpoint}
    )
    rows = catalog.load_table(f"{ns}.events").scan().to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
