"""Secrets never show (issue 9, "Secrets", the JVM-free part): validate and the settings plan prints
keep secret values out of every output, and committed files hold only references.

The full check (run with a failure, maintain, event-log rows and written files) needs Spark and the
local stack; see docs/reliability.md.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_iceberg.cli.main import main
from kafka_iceberg.refs import SENSITIVE_KEY, find_refs, mask_mapping

REPO = Path(__file__).resolve().parents[1]
SECRETS = {
    "KI_SEC_KAFKA_PASSWORD": "kafka-pw-7f3a91c2e4",
    "KI_SEC_S3_SECRET": "s3-secret-5b8d0e6f1a",
    "KAFKA_ICEBERG_SECRET__SCOPE__CLIENT_SECRET": "oauth-secret-c4e2a9b7d1",
    "KAFKA_ICEBERG_SECRET__SCOPE__TOKEN": "bearer-token-e9f1b3a5c7",
}
ENV_FILE = """\
kafka:
  bootstrap_servers: 'b:9092'
  security_protocol: SASL_SSL
  sasl_mechanism: SCRAM-SHA-512
  sasl_username: ingest
  sasl_password: ${env:KI_SEC_KAFKA_PASSWORD}
checkpoint_root: /tmp/ki-sec-checkpoints
default_catalog: lake
catalogs:
  lake:
    type: rest
    uri: https://catalog.example
    warehouse: wh
    auth: {type: oauth2, client_id: app, client_secret: '${secret:scope/client_secret}'}
    storage:
      type: s3
      region: eu-west-1
      access_key_id: AKIDEXAMPLE
      secret_access_key: ${env:KI_SEC_S3_SECRET}
  other:
    type: rest
    uri: https://other.example
    warehouse: wh
    auth: {type: bearer, token: '${secret:scope/token}'}
"""
PIPELINE = (
    "pipeline: p\ntables:\n  - name: orders\n    namespace: sales\n    source: {topics: [orders], format: json}\n"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "environments").mkdir()
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "environments" / "local.yml").write_text(ENV_FILE)
    (tmp_path / "pipelines" / "p.yml").write_text(PIPELINE)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # the project is found from the current directory first
    return tmp_path


def _assert_clean(text: str) -> None:
    for value in SECRETS.values():
        assert value not in text


def test_validate_output_holds_no_secret_value(project, capsys):
    assert main(["validate", "--pipeline", str(project / "pipelines"), "--env", "local"]) == 0
    out, err = capsys.readouterr()
    assert "valid:" in out
    _assert_clean(out + err)


def test_validate_failure_output_holds_no_secret_value(project, capsys):
    (project / "pipelines" / "p.yml").write_text(PIPELINE + "    commit_mode: upsert\n")
    env = project / "environments" / "local.yml"
    env.write_text(
        env.read_text().replace("uri: https://catalog.example", "uri: https://catalog.example\n    bogus: 1")
    )
    assert main(["validate", "--pipeline", str(project / "pipelines"), "--env", "local"]) == 2
    out, err = capsys.readouterr()
    assert "configuration problem" in err
    _assert_clean(out + err)


def test_plan_settings_are_masked_and_resolved_secrets_redacted(project):
    """What ``plan`` prints for catalogs (``catalog_settings``): references or masks, never a value;
    a resolved value is scrubbed from anything printed once registered."""
    from kafka_iceberg.refs import MASK, redact
    from kafka_iceberg.run import catalog_settings, prepare

    prepared = prepare(project / "pipelines", env_name="local")
    settings = catalog_settings(prepared)
    text = json.dumps(settings)
    _assert_clean(text)
    lake = settings["lake"]
    assert lake["spark.sql.catalog.lake.uri"] == "https://catalog.example"
    for key, value in lake.items():
        if SENSITIVE_KEY.search(key):
            assert value in (MASK, "") or value.startswith("${"), (key, value)
    _assert_clean(repr(prepared.settings))  # resolved once by prepare, masked when shown
    for name, rendered in prepared.rendered.items():
        _assert_clean(json.dumps(rendered.masked()))
        resolved = prepared.settings.catalogs[name]
        assert any(v in resolved.values() for v in SECRETS.values())  # prepare really resolved them
        _assert_clean(json.dumps(mask_mapping(resolved)))  # masked by key name
        for key, value in resolved.items():  # and ${secret:...} values are scrubbed from any text
            if rendered.conf[key].startswith("${secret:"):
                assert value not in redact(f"failed with {key}={value}")


# Committed files: references only.

REFERENCE = re.compile(r"^\s*(\$\{[^}]+\}\s*)+$|^\{\{secrets/[^}]+\}\}$")
ALLOWED_LITERALS = {"", "none", "true", "false", "read", "write"}  # e.g. GitHub `id-token: write`
CONFIG_SUFFIXES = (".yml", ".yaml")


def _committed(suffixes: tuple[str, ...] | None = None) -> list[Path]:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    paths = [REPO / f for f in files if not f.startswith("tests/corpus/")]
    return [p for p in paths if p.is_file() and (suffixes is None or p.name.endswith(suffixes))]


def _walk(node: Any, path: str = "") -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((f"{path}.{k}", str(k), v))
            out.extend(_walk(v, f"{path}.{k}"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_walk(v, f"{path}[{i}]"))
    return out


def test_committed_yaml_holds_credentials_only_as_references():
    checked = 0
    for file in _committed(CONFIG_SUFFIXES):
        try:
            docs = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
        except yaml.YAMLError:
            continue  # broken fixtures on purpose
        for doc in docs:
            for where, key, value in _walk(doc):
                if not SENSITIVE_KEY.search(key) or not isinstance(value, str | int | float):
                    continue
                text = str(value).strip()
                checked += 1
                ok = (
                    text.lower() in ALLOWED_LITERALS
                    or bool(REFERENCE.match(text))
                    or (bool(find_refs(text)) and all(r.kind in ("env", "secret", "local") for r in find_refs(text)))
                )
                ok = ok or text.startswith("${var.")  # bundle variables, filled from the CI's secrets
                assert ok, f"{file.relative_to(REPO)}: {where} holds a literal credential"
    assert checked >= 10  # the shipped environments reference their credentials


def test_no_committed_file_holds_an_aws_key_or_private_key():
    aws = re.compile(rb"(?<![A-Z0-9])(AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])")
    pem = re.compile(rb"-----BEGIN (RSA |EC |OPENSSH |)PRIVATE KEY-----")
    me = Path(__file__).resolve()
    for file in _committed():
        if file.resolve() == me:
            continue
        data = file.read_bytes()
        assert not aws.search(data), f"{file.relative_to(REPO)}: looks like an AWS access key id"
        assert not pem.search(data), f"{file.relative_to(REPO)}: holds a private key"


def test_resolved_credentials_stay_out_of_the_settings_reprs():
    # pytest and logging show a frame's locals by repr(): a resolved credential must not be in it.
    from kafka_iceberg.catalogs import RestAuth, S3Storage
    from kafka_iceberg.checks.error_topic import ErrorTopicPublisher
    from kafka_iceberg.decode.registry import RegistryClient
    from kafka_iceberg.environment import KafkaSettings
    from kafka_iceberg.source.direct import DirectReader
    from kafka_iceberg.spec.model import RegistryAuth, SourceSpec

    secret = "s3cr3t-value-4711"
    kafka = {"bootstrap.servers": "b:9092", "sasl.username": "u", "sasl.password": secret}
    shown = [
        KafkaSettings(
            bootstrap_servers="b:9092",
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_username="u",
            sasl_password=secret,
        ),
        S3Storage(type="s3", access_key_id="AK", secret_access_key=secret, session_token=secret),
        RegistryClient(url="http://r", username="u", password=secret),
        RegistryClient(url="http://r", bearer=secret),
        RegistryAuth(username="u", password=secret),
        RestAuth(type="bearer", token=secret),
        RestAuth(type="oauth2", client_id="c", client_secret=secret),
        RestAuth(type="sigv4", signing_region="us-east-1", access_key_id="AK", secret_access_key=secret),
        # the Kafka clients' resolved settings, held by the direct reader and the error-topic publisher
        DirectReader(None, SourceSpec(topics=["t"]), kafka, kafka, "g", Path("staging")),
        ErrorTopicPublisher(topic="t", producer_config=kafka, consumer_config=kafka, pipeline="p", table="n.t"),
    ]
    assert all(secret not in repr(obj) for obj in shown), [repr(obj) for obj in shown if secret in repr(obj)]
