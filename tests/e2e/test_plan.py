"""`plan` is `run` stopped before any Kafka read or Iceberg change: it shows what would be created
or evolved and the rendered settings with secrets masked, and changes nothing."""

from __future__ import annotations

import json

import pytest
import yaml

from kafka_iceberg.refs import secret_env_name
from kafka_iceberg.run import plan, prepare
from tests.support.kafka import create_topic
from tests.support.project import REPO, entry_point, project
from tests.support.run import run_pipeline, unique

pytestmark = pytest.mark.integration


def orders(ns, topic, columns="id: long, name: string"):
    return f"""
pipeline: planned
catalog: lake
tables:
  - name: orders
    namespace: {ns}
    source: {{topics: [{topic}], format: flatten}}
    schema: {{columns: {{{columns}}}}}
    partitioning: [bucket(8, id)]
    commit_mode: upsert
    key_fields: [id]
"""


def test_plan_creates_nothing_then_shows_the_evolution(tmp_path, lake, spark):
    ns, topic = unique("plan"), unique("orders")
    prepared = prepare(project(tmp_path / "a", orders(ns, topic)), env_name="local")
    (item,) = plan(prepared, spark)
    assert item["table"] == f"lake.{ns}.orders"
    assert "+ create table" in item["changes"] and "bucket(8, `id`)" in item["changes"]
    assert item["writer"] == "spark"  # write.engine auto: an upsert table takes Spark's writer (MERGE)
    assert not lake.pyiceberg().table_exists(f"{ns}.orders")  # nothing was created

    create_topic(lake.status["kafka"]["bootstrap"], topic)  # Spark's Kafka source fails on a missing topic
    run_pipeline(tmp_path / "b", orders(ns, topic))  # creates the (empty) table
    assert lake.pyiceberg().table_exists(f"{ns}.orders")
    prepared = prepare(
        project(tmp_path / "c", orders(ns, topic, "id: long, name: string, region: string")), env_name="local"
    )
    (item,) = plan(prepared, spark)
    assert "+ add column region STRING" in item["changes"] and "create table" not in item["changes"]
    schema = lake.pyiceberg().load_table(f"{ns}.orders").schema()
    assert "region" not in [f.name for f in schema.fields]  # still only planned


def test_plan_cli_masks_secrets_and_prints_json(tmp_path, stack, monkeypatch):
    secret = "s3cr3t-header-value-never-printed"
    env = yaml.safe_load((REPO / "environments" / "local.yml").read_text())
    env["catalogs"]["lake"]["properties"] = {"header.X-Api-Key": "${secret:kafka_iceberg/api_key}"}
    secretive = yaml.safe_dump(env, sort_keys=False)
    path = project(tmp_path, orders(unique("plan"), unique("orders")), extra_env={"secretive": secretive})
    monkeypatch.setenv(secret_env_name("kafka_iceberg", "api_key"), secret)
    result = entry_point(
        "kafka-iceberg", "plan", "--json", "--pipeline", str(path), "--env", "secretive", stack_dir=stack.run_dir
    )
    assert result.returncode == 0, result.stderr
    assert secret not in result.stdout and secret not in result.stderr
    document = json.loads(result.stdout[result.stdout.index("{") :])
    assert document["catalogs"]["lake"]["spark.sql.catalog.lake.header.X-Api-Key"] == "****"
    assert document["tables"][0]["commit_mode"] == "upsert"


def test_plan_covers_every_table_of_the_demo_pipeline_including_those_whose_columns_come_from_data(lake, spark):
    """The Debezium upsert table and the inferred flatten table are created by their first batch:
    plan says so instead of checking their keys against columns nobody declared (it once failed)."""
    prepared = prepare(REPO / "pipelines" / "shop.yml", env_name="local")
    items = {item["table"]: item for item in plan(prepared, spark)}
    assert len(items) == len(prepared.jobs) == 7
    products = items["lake.stock.products"]
    assert products["inferred_columns"] and "by its first batch" in products["changes"]
    assert products["commit_mode"] == "upsert"
    declared = [i for i in items.values() if not i["inferred_columns"]]
    assert declared and all("by its first batch" not in i["changes"] for i in declared)
