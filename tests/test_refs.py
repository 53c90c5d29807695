"""References resolve at run time; secrets never show up in printed settings or logs."""

from __future__ import annotations

import base64
import http.server
import json
import logging
import threading
import urllib.parse

import pytest

from kafka_iceberg.errors import SecretResolutionError
from kafka_iceberg.refs import MASK, RedactingFilter, Resolver, mask_mapping, secret_env_name, workspace_secret


def test_env_and_local_references_resolve():
    resolver = Resolver(env={"BROKER": "b:9092"}, local=lambda: {"run_dir": "/r", "s3": {"endpoint": "http://x"}})
    assert resolver.value("${env:BROKER}") == "b:9092"
    assert resolver.value("${local:s3.endpoint}/bucket") == "http://x/bucket"
    assert resolver.value("plain") == "plain"


def test_unset_variable_names_the_variable():
    with pytest.raises(SecretResolutionError, match="environment variable NOPE is not set"):
        Resolver(env={}).value("${env:NOPE}")


def test_local_reference_without_a_running_stack_says_how_to_start_it():
    resolver = Resolver(env={}, local=lambda: {"running": False, "run_dir": "/r"})
    with pytest.raises(SecretResolutionError, match="kafka-iceberg local up"):
        resolver.value("${local:kafka.bootstrap}")


def test_secret_env_override_is_used_and_then_redacted_from_logs(caplog):
    env = {secret_env_name("kafka", "sasl-password"): "hunter2-very-secret"}
    resolver = Resolver(env=env, secrets=lambda s, k: pytest.fail("workspace must not be asked"))
    assert resolver.value("${secret:kafka/sasl-password}") == "hunter2-very-secret"
    logger = logging.getLogger("test.redaction")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="test.redaction"):
        logger.info("connecting with %s", "hunter2-very-secret")
    assert "hunter2-very-secret" not in caplog.text
    assert MASK in caplog.text


def test_masking_covers_secret_references_and_credential_keys():
    conf = {
        "spark.sql.catalog.x.uri": "https://c",
        "spark.sql.catalog.x.rest.secret-access-key": "${env:SK}",
        "spark.sql.catalog.x.credential": "id:secret",
        "spark.sql.catalog.x.warehouse": "${secret:scope/wh}",
        "spark.sql.catalog.x.s3.access-key-id": "AKIA",
    }
    masked = mask_mapping(conf)
    assert masked["spark.sql.catalog.x.uri"] == "https://c"
    assert {masked[k] for k in conf if not k.endswith("uri")} == {MASK}


class _SecretsApi(http.server.BaseHTTPRequestHandler):
    store = {("kafka", "password"): "s3cr3t-from-workspace"}

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        authorized = self.headers.get("Authorization") == "Bearer dapi-test-token"
        value = self.store.get((query.get("scope"), query.get("key")))
        # Anything but an authorized secrets read is a 404 (the SDK also probes host metadata).
        if url.path != "/api/2.0/secrets/get" or not authorized or value is None:
            body, code = {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such secret"}, 404
        else:
            body, code = {"key": query["key"], "value": base64.b64encode(value.encode()).decode()}, 200
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def workspace(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SecretsApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("DATABRICKS_HOST", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-test-token")
    yield
    server.shutdown()


def test_workspace_secrets_come_through_databricks_sdk(workspace):
    assert Resolver(env={}).value("${secret:kafka/password}") == "s3cr3t-from-workspace"


def test_missing_workspace_secret_fails_without_leaking(workspace):
    with pytest.raises(SecretResolutionError) as err:
        workspace_secret("kafka", "nope")
    assert "kafka/nope" in str(err.value) and "dapi-test-token" not in str(err.value)


def test_a_credential_from_env_is_redacted_by_its_key(caplog):
    """A password read with ${env:} is no ${secret:}, yet its key (or a JAAS line) says what it is."""
    resolver = Resolver(env={"KAFKA_PW": "pw-from-the-environment", "USER": "alice-the-user"})
    assert resolver.setting("sasl.password", "${env:KAFKA_PW}") == "pw-from-the-environment"
    assert resolver.setting("kafka.bootstrap.servers", "${env:USER}") == "alice-the-user"
    logger = logging.getLogger("test.redaction.env")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="test.redaction.env"):
        logger.info("option %s user %s", "pw-from-the-environment", "alice-the-user")
    assert "pw-from-the-environment" not in caplog.text
    assert "alice-the-user" in caplog.text  # not a credential: not masked


def test_verbose_logging_never_shows_py4j_commands():
    """py4j logs each command it sends at DEBUG: a Kafka source's JAAS option, password and all."""
    from kafka_iceberg.cli.output import setup_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        setup_logging(verbose=True)
        assert not logging.getLogger("py4j.clientserver").isEnabledFor(logging.DEBUG)
        assert not logging.getLogger("py4j.java_gateway").isEnabledFor(logging.DEBUG)
    finally:
        root.handlers[:], root.level = handlers, level
