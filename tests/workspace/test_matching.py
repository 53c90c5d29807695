"""Which workspace jobs are a target's: the rule of ``belongs_to_target`` and ``load_target``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_iceberg.errors import ConfigError
from kafka_iceberg.workspace import Target, belongs_to_target, load_target

REPO = Path(__file__).resolve().parents[2]
NAME = "kafka_iceberg_ingest_json_lake"
# The service principals' home folders of databricks.yml's staging and prod root_path.
STAGING = "/Workspace/Users/5f3c2a9e-1d47-4b8a-9c61-0e2f4a7b8c90/.bundle/kafka_iceberg/staging"
PROD = "/Workspace/Users/a7d91e04-6b3c-4f25-8e1a-2c9b0d5f6e31/.bundle/kafka_iceberg/prod"


def test_load_target_reads_ingest_jobs_and_root_path():
    target = load_target(REPO, "staging")

    assert target.mode == "production"
    assert target.root_path == STAGING
    assert target.host == "https://dbc-staging.cloud.databricks.com"
    assert target.jobs == {
        f"ingest_{f}_lake": f"kafka_iceberg_ingest_{f}_lake"
        for f in ["avro", "binary", "csv", "flatten", "json", "text"]
    }
    assert load_target(REPO, "dev").root_path is None


def test_load_target_rejects_an_unknown_target():
    with pytest.raises(ConfigError) as err:
        load_target(REPO, "qa")
    assert err.value.problems[0].code == "UNKNOWN_TARGET"


@pytest.mark.parametrize(
    ("name", "path", "expected"),
    [
        (NAME, f"{STAGING}/state/metadata.json", True),
        (NAME, f"{PROD}/state/metadata.json", False),  # another target
        (NAME, f"{STAGING}-old/state/metadata.json", False),  # prefix only
        (NAME, None, False),  # not deployed by a bundle
        ("kafka_iceberg_ingest_csv_lake", f"{STAGING}/state/metadata.json", False),
        (f"[dev ana] {NAME}", f"{STAGING}/state/metadata.json", False),
    ],
)
def test_production_target_rule(name, path, expected):
    assert belongs_to_target(load_target(REPO, "staging"), NAME, name, path) is expected


@pytest.mark.parametrize(
    ("name", "path", "expected"),
    [
        (f"[dev ana] {NAME}", "/Workspace/Users/ana@example.com/.bundle/kafka_iceberg/dev/state/metadata.json", True),
        (NAME, "/Workspace/Users/ana@example.com/.bundle/kafka_iceberg/dev/state/metadata.json", False),
        (
            f"[dev ana] {NAME}",
            "/Workspace/Users/ana@example.com/.bundle/kafka_iceberg/staging/state/metadata.json",
            False,
        ),
        # a pull request's copy (resources/env.dev.yml: root_path .../dev/${var.dev_copy})
        (
            f"[dev pr-42] {NAME}",
            "/Workspace/Users/ci-principal/.bundle/kafka_iceberg/dev/pr-42/state/metadata.json",
            True,
        ),
    ],
)
def test_development_target_rule(name, path, expected):
    target = Target("kafka_iceberg", "dev", "development", None, None, {"ingest_json_lake": NAME})
    assert belongs_to_target(target, NAME, name, path) is expected
