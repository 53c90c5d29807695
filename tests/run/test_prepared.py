"""``prepare`` resolves every reference a run reads once, into masked settings the rest of the run
reads; what ``plan`` shows of a table's reader is what the run is given (no JVM, no stack)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_iceberg.catalogs import catalog_properties
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.run import prepare

ENV = """\
kafka:
  bootstrap_servers: ${env:KI_T_BOOTSTRAP}
  security_protocol: SASL_SSL
  sasl_mechanism: SCRAM-SHA-512
  sasl_username: ingest
  sasl_password: ${env:KI_T_KAFKA_PASSWORD}
checkpoint_root: ${env:KI_T_CHECKPOINTS}
default_catalog: lake
schema_registry: {url: '${env:KI_T_REGISTRY}'}
catalogs:
  lake:
    type: hadoop
    warehouse: ${env:KI_T_WAREHOUSE}
  unused:
    type: hadoop
    warehouse: ${env:KI_T_NOT_SET_AND_NOT_NEEDED}
"""
PIPELINE = """\
pipeline: p
tables:
  - {name: orders, namespace: sales, source: {topics: [orders], format: json}}
  - {name: payments, namespace: sales, source: {topics: [payments], format: avro}}
"""
VALUES = {
    "KI_T_BOOTSTRAP": "broker-1:9093",
    "KI_T_KAFKA_PASSWORD": "kafka-password-3c9e1f",
    "KI_T_CHECKPOINTS": "/tmp/ki-test-checkpoints/",
    "KI_T_REGISTRY": "https://registry.example",
    "KI_T_WAREHOUSE": "/tmp/ki-test-warehouse",
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "environments").mkdir()
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "environments" / "prod.yml").write_text(ENV)
    (tmp_path / "pipelines" / "p.yml").write_text(PIPELINE)
    for name, value in VALUES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KI_T_NOT_SET_AND_NOT_NEEDED", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "pipelines"


def test_prepare_resolves_once_and_the_run_reads_the_settings(project, monkeypatch):
    prepared = prepare(project, env_name="prod")
    monkeypatch.setenv("KI_T_BOOTSTRAP", "changed-after-prepare:1")  # read once: nothing later sees this

    settings = prepared.settings
    assert settings.kafka["consumer"]["bootstrap.servers"] == "broker-1:9093"
    assert settings.kafka["producer"]["sasl.password"] == VALUES["KI_T_KAFKA_PASSWORD"]
    assert settings.checkpoint_root == "/tmp/ki-test-checkpoints"
    assert settings.checkpoints[prepared.jobs[0].key] == "/tmp/ki-test-checkpoints/p/sales.orders"
    assert catalog_properties("lake", settings.catalogs["lake"])["warehouse"] == VALUES["KI_T_WAREHOUSE"]
    assert set(settings.catalogs) == {"lake"}  # the unused catalog's unset variable was never needed
    orders = settings.spark_sources["p.sales.orders"]
    assert orders["kafka.bootstrap.servers"] == "broker-1:9093" and orders["subscribe"] == "orders"
    assert ("Kafka broker", "broker-1:9093") in {(e.service, e.address) for e in settings.endpoints}
    # the environment's registry, resolved, is the Avro table's own now; the JSON table has none
    registries = [j.spec.source.schema_registry for j in prepared.jobs]
    assert registries[0] is None and registries[1] is not None
    assert registries[1].url == "https://registry.example"
    assert VALUES["KI_T_KAFKA_PASSWORD"] not in repr(settings)  # shown masked


def test_what_plan_shows_of_a_reader_is_what_the_run_gets(project):
    prepared = prepare(project, env_name="prod")
    for job in prepared.jobs:
        shown = prepared.sources[job.key]  # plan prints these, masked
        given = prepared.settings.spark_sources[job.key]
        assert shown.keys() == given.keys()
        for key, value in shown.items():  # the same options, references in one and values in the other
            if "${" not in value:
                assert given[key] == value, key
        # locally Spark's own JAAS module; a plan once printed Databricks' relocated one
        assert given["kafka.sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule")


def test_an_unresolvable_reference_the_run_needs_is_a_config_error_naming_file_and_key(project, monkeypatch):
    monkeypatch.delenv("KI_T_KAFKA_PASSWORD")
    monkeypatch.delenv("KI_T_REGISTRY")
    with pytest.raises(ConfigError) as caught:
        prepare(project, env_name="prod")
    problems = {p.key_path: p for p in caught.value.problems}
    assert set(problems) == {"kafka.sasl_password", "schema_registry.url"}
    assert all(p.code == "UNSET_ENV_VAR" and p.file.endswith("prod.yml") for p in problems.values())

    # a run of the JSON table alone reads no registry, so it does not need one
    monkeypatch.setenv("KI_T_KAFKA_PASSWORD", VALUES["KI_T_KAFKA_PASSWORD"])
    prepared = prepare(project, env_name="prod", formats={"json"})
    assert [j.spec.identifier for j in prepared.jobs] == ["sales.orders"]


def test_available_now_is_decided_by_prepare(project):
    prepared = prepare(project, env_name="prod", available_now=True)
    assert all(j.spec.trigger.available_now for j in prepared.jobs)


def test_every_reference_that_fails_is_named_at_its_file_and_key_in_one_error(project, monkeypatch):
    """One pass resolves everything: a check reports every failing reference at once, where a file holds it."""
    env_file = project.parent / "environments" / "prod.yml"
    env_file.write_text(ENV.replace("${env:KI_T_WAREHOUSE}", "${local:no_such_service.warehouse}"))
    pipeline = project / "p.yml"
    own_registry = "registry: {url: 'https://r.example', auth: {username: u, password: '${local:no_such.password}'}}"
    pipeline.write_text(PIPELINE.replace("format: avro}", "format: avro, schema_" + own_registry + "}"))
    monkeypatch.setenv("KAFKA_ICEBERG_RUN_DIR", str(project.parent / "no-stack-here"))
    with pytest.raises(ConfigError) as caught:
        prepare(project, env_name="prod")
    problems = {(Path(p.file).name, p.key_path): p for p in caught.value.problems}
    assert set(problems) == {
        ("prod.yml", "catalogs.lake.warehouse"),
        ("p.yml", "tables[1].source.schema_registry.auth.password"),
    }
    assert all(p.code == "UNRESOLVED_REFERENCE" for p in problems.values())
    assert problems[("p.yml", "tables[1].source.schema_registry.auth.password")].value == "${local:no_such.password}"
