"""Secrets never show, end to end: validate, plan, run (with a failing table) and maintain-tables
run as subprocesses against the local stack, which verifies every credential itself: the REST
catalog's SigV4 signature (secret key from ``${secret:...}``), S3's SigV4 signature (keys from
``${env:...}``) and Kafka's SASL/SCRAM-SHA-512 login (password from ``${env:...}``), read through
Spark's Kafka source on the broker's SASL listener. The run only works if the secrets were really
used. Then every output, log, Spark event log, metrics file, event-log row, table file in the
object store and error-topic record is searched for the secret values: none may appear.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from kafka_iceberg.local.readback import pyiceberg_catalog
from kafka_iceberg.refs import secret_env_name
from tests.support.kafka import consume_all, produce
from tests.support.run import unique
from tests.support.store import object_store

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCOPE, KEY = "ki_e2e", "catalog_secret_access_key"

ENVIRONMENT = """\
kafka:
  bootstrap_servers: ${{local:kafka.sasl_bootstrap}}
  reader: spark
  security_protocol: SASL_PLAINTEXT
  sasl_mechanism: SCRAM-SHA-512
  sasl_username: ${{env:KI_E2E_KAFKA_USERNAME}}
  sasl_password: ${{env:KI_E2E_KAFKA_PASSWORD}}
checkpoint_root: {out}/checkpoints
metrics_dir: {out}/metrics
default_catalog: lake
catalogs:
  lake:
    type: rest
    uri: ${{local:catalog.uri}}
    warehouse: ${{local:catalog.warehouse}}
    auth:
      type: sigv4
      signing_name: s3tables
      signing_region: ${{local:s3.region}}
      access_key_id: ${{env:KI_E2E_S3_ACCESS_KEY_ID}}
      secret_access_key: '${{secret:{scope}/{key}}}'
    storage:
      type: s3
      endpoint: ${{local:s3.endpoint}}
      region: ${{local:s3.region}}
      path_style: true
      access_key_id: ${{env:KI_E2E_S3_ACCESS_KEY_ID}}
      secret_access_key: ${{env:KI_E2E_S3_SECRET_ACCESS_KEY}}
event_log: {{catalog: lake, table: {ns}.event_log}}
spark_conf:
  spark.eventLog.enabled: "true"
  spark.eventLog.dir: file://{out}/spark-events
  spark.local.dir: {out}/spark-local
"""
PIPELINE = """\
pipeline: secrets
catalog: lake
tables:
  - name: orders
    namespace: {ns}
    source: {{topics: [{orders}], format: flatten}}
    schema: {{columns: {{id: long, name: string}}}}
    schema_evolution: strict
    partition_window: none
    errors: {{error_topic: {errors}}}
  - name: strict_orders              # no error target: its second batch's bad record fails the run
    namespace: {ns}
    source: {{topics: [{strict}], format: flatten, max_records_per_batch: 1}}
    schema: {{columns: {{id: long}}}}
    schema_evolution: strict
    partition_window: none
"""


def _forms(value: str) -> set[str]:
    """A secret and the encodings it could be written in."""
    raw = value.encode()
    return {
        value,
        urllib.parse.quote(value, safe=""),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        raw.hex(),
    }


class Leaks:
    """Searches texts for secret values and remembers where they were found."""

    def __init__(self, values: list[str]):
        self.values = values
        self.found: list[str] = []

    def check(self, where: str, data: bytes | str | None) -> None:
        if data is None:
            return
        blob = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
        for value in self.values:
            for form in _forms(value):
                if form.encode() in blob:
                    self.found.append(f"{where}: holds {form!r} (a form of a secret)")


@pytest.fixture
def secret_values(stack: Any) -> dict[str, str]:
    """The stack's own credentials: the servers verify them, so a run works only if they were used."""
    return {
        "s3_secret_access_key": stack.s3_secret_access_key,
        "kafka_password": stack.kafka_sasl_password,
    }


def test_the_stack_really_checks_credentials(stack):
    """Without this the end-to-end test could pass with credentials that were never verified."""
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    import requests
    from confluent_kafka.admin import AdminClient

    def signed(url: str, service: str, secret: str) -> int:
        req = botocore.awsrequest.AWSRequest("GET", url)
        creds = botocore.credentials.Credentials(stack.s3_access_key_id, secret)
        botocore.auth.SigV4Auth(creds, service, "us-east-1").add_auth(req)
        return requests.get(req.url, headers=dict(req.headers), timeout=10).status_code

    namespaces = f"{stack.catalog_uri}/v1/warehouse/namespaces"
    assert signed(namespaces, "s3tables", stack.s3_secret_access_key) == 200
    assert signed(namespaces, "s3tables", "wrong") == 403
    assert requests.get(namespaces, timeout=10).status_code == 403  # unsigned
    assert signed(f"{stack.s3_endpoint}/warehouse", "s3", stack.s3_secret_access_key) == 200
    assert signed(f"{stack.s3_endpoint}/warehouse", "s3", "wrong") == 403
    assert requests.get(f"{stack.s3_endpoint}/warehouse", timeout=10).status_code == 403
    sasl = {
        "bootstrap.servers": stack.kafka_sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": stack.kafka_sasl_username,
        "log_level": "0",
    }
    assert AdminClient({**sasl, "sasl.password": stack.kafka_sasl_password}).list_topics(timeout=10).brokers
    errors: list[object] = []
    refused = AdminClient({**sasl, "sasl.password": "wrong", "error_cb": errors.append})
    with pytest.raises(Exception, match="transport"):
        refused.list_topics(timeout=5)
    refused.poll(1)  # serve the error callbacks
    assert any("Authentication failed" in str(e) for e in errors), errors  # refused, not unreachable


def _cli(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, check=False
    )


def test_no_secret_in_output_logs_event_log_or_written_files(tmp_path, stack, secret_values):
    ns = unique("secrets")
    orders, strict, errors = unique("orders"), unique("strict"), unique("errors")
    out = tmp_path / "out"
    for d in ("spark-events", "spark-local"):
        (out / d).mkdir(parents=True)
    project = tmp_path / "project"
    (project / "environments").mkdir(parents=True)
    (project / "pipelines").mkdir()
    env_file = ENVIRONMENT.format(out=out, scope=SCOPE, key=KEY, ns=ns)
    (project / "environments" / "e2e.yml").write_text(env_file)
    (project / "pipelines" / "p.yml").write_text(PIPELINE.format(ns=ns, orders=orders, strict=strict, errors=errors))

    good_bad_good = [(b"1", b'{"id":1,"name":"a"}'), (b"2", b'{"id":"two"}'), (b"3", b'{"id":3}')]
    produce(stack.kafka_bootstrap, orders, good_bad_good, partition=0)
    produce(stack.kafka_bootstrap, strict, [(b"1", b'{"id":1}'), (b"2", b'{"id":"nope"}')], partition=0)

    env = {
        **os.environ,
        "KAFKA_ICEBERG_RUN_DIR": stack.run_dir,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
        secret_env_name(SCOPE, KEY): stack.s3_secret_access_key,
        "KI_E2E_S3_ACCESS_KEY_ID": stack.s3_access_key_id,
        "KI_E2E_S3_SECRET_ACCESS_KEY": stack.s3_secret_access_key,
        "KI_E2E_KAFKA_USERNAME": stack.kafka_sasl_username,
        "KI_E2E_KAFKA_PASSWORD": stack.kafka_sasl_password,
    }
    common = ["--pipeline", "pipelines/p.yml", "--env", "e2e"]
    runs = {
        "validate": _cli(["kafka-iceberg", "validate", *common], cwd=project, env=env),
        "plan": _cli(["kafka-iceberg", "-v", "plan", *common], cwd=project, env=env),
        "run": _cli(["kafka-iceberg", "-v", "run", *common], cwd=project, env=env),
        "maintain": _cli(["maintain-tables", "-v", *common], cwd=project, env=env),
        "verify": _cli(["kafka-iceberg", "verify", *common], cwd=project, env=env),
    }
    for name, done in runs.items():
        print(f"--- {name}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
    assert runs["validate"].returncode == 0 and runs["plan"].returncode == 0
    assert runs["run"].returncode == 1  # strict_orders' bad record, no error target
    assert f"topic {strict} partition 0 offset 1" in runs["run"].stderr
    assert runs["maintain"].returncode == 0
    assert runs["verify"].returncode == 0  # every offset committed so far in one place, through the secured stack

    # The secrets were used: the catalog, the store and the broker refuse anything else
    # (test_the_stack_really_checks_credentials), and the good rows really are in the table.
    lake = pyiceberg_catalog(stack.describe())
    rows = lake.load_table(f"{ns}.orders").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == [1, 3]
    assert [r["id"] for r in lake.load_table(f"{ns}.strict_orders").scan().to_arrow().to_pylist()] == [1]

    leaks = Leaks(list(secret_values.values()))
    for name, done in runs.items():
        leaks.check(f"{name} stdout", done.stdout)
        leaks.check(f"{name} stderr", done.stderr)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]  # the environment file included: references only
    for path in written:
        leaks.check(str(path.relative_to(tmp_path)), path.read_bytes())
    assert any("spark-events" in str(p) for p in written)  # Spark's event logs were written and searched
    assert any("metrics" in str(p) for p in written)

    event_log = lake.load_table(f"{ns}.event_log").scan().to_arrow().to_pylist()
    assert {r["kind"] for r in event_log} == {"batch", "maintenance"}
    assert any(r["error"] for r in event_log)  # the failed batch is there, with its error
    leaks.check("event-log rows", json.dumps(event_log, default=str))

    store = s3_files(stack, [lake.load_table(f"{ns}.{t}").location() for t in ("orders", "strict_orders", "event_log")])
    assert any(k.endswith(".metadata.json") for k in store) and any(k.endswith(".parquet") for k in store)
    assert any(k.endswith(".avro") for k in store)  # manifests and manifest lists too
    for key, data in store.items():
        leaks.check(key, data)

    published = consume_all(stack.kafka_bootstrap, errors)
    assert [r.value for r in published] == [b'{"id":"two"}']
    for rec in published:
        leaks.check(f"error topic {errors} offset {rec.offset}", repr((rec.key, rec.value, rec.headers)))

    assert not leaks.found, "\n".join(leaks.found)


def s3_files(stack: Any, locations: list[str]) -> dict[str, bytes]:
    """Every object under the tables' locations, read straight from the store."""
    from pyarrow import fs

    store = object_store(stack.describe())
    out: dict[str, bytes] = {}
    for location in locations:
        prefix = location.split("://", 1)[1]
        for info in store.get_file_info(fs.FileSelector(prefix, recursive=True)):
            if info.type == fs.FileType.File:
                with store.open_input_stream(info.path) as f:
                    out[info.path] = f.read()
    return out
