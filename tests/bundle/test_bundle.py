"""The bundle: every YAML file is valid for Databricks, and every job runs something that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml
from databricks.bundles.jobs import Job

from kafka_iceberg.bundle import add_runtime_libraries, with_runtime_libraries
from kafka_iceberg.environment import load_environment
from kafka_iceberg.jars import cluster_maven_coordinates
from kafka_iceberg.spec.load import load_pipeline

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO.parent / "shared" / "databricks-bundle-schema.json"
BUNDLE_FILES = [REPO / "databricks.yml", *sorted((REPO / "resources").glob("*.yml"))]
ROOT = yaml.safe_load((REPO / "databricks.yml").read_text())
TARGETS = list(ROOT["targets"])


def _jobs() -> dict[str, dict[str, Any]]:
    jobs: dict[str, dict[str, Any]] = {}
    for path in BUNDLE_FILES:
        jobs.update((yaml.safe_load(path.read_text()).get("resources") or {}).get("jobs") or {})
    return jobs


JOBS = _jobs()


@pytest.mark.parametrize("path", BUNDLE_FILES, ids=lambda p: p.name)
def test_bundle_file_matches_the_bundle_schema(path):
    assert SCHEMA.exists(), f"bundle JSON schema expected at {SCHEMA} (../shared beside the repository)"
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(SCHEMA), str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("key", sorted(JOBS))
def test_job_is_a_valid_databricks_bundles_job(key):
    job = Job.from_dict(JOBS[key])
    assert job.tasks, key


def test_targets_follow_the_promotion_path():
    targets = ROOT["targets"]
    assert targets["dev"]["mode"] == "development" and targets["dev"]["default"] is True
    for name in ("staging", "prod"):
        assert targets[name]["mode"] == "production"
        assert targets[name]["permissions"], name
        assert "${bundle.target}" in targets[name]["workspace"]["root_path"]


def test_every_variable_without_default_is_set_in_every_target():
    declared = ROOT["variables"]
    required = {name for name, var in declared.items() if "default" not in var}
    for target in TARGETS:
        overrides = yaml.safe_load((REPO / "resources" / f"env.{target}.yml").read_text())["targets"][target]
        missing = required - set(overrides.get("variables", {}))
        assert not missing, f"target {target} leaves {missing} unset"


def test_every_variable_used_is_declared_once_with_a_description():
    text = "\n".join(p.read_text() for p in BUNDLE_FILES)
    used = set(re.findall(r"\$\{var\.([a-z_]+)\}", text))
    declared = ROOT["variables"]
    assert used <= set(declared), used - set(declared)
    assert all(v.get("description") for v in declared.values())


def test_jobs_run_entry_points_that_exist_with_files_that_exist():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    for key, job in JOBS.items():
        for task in job["tasks"]:
            wheel = task["python_wheel_task"]
            assert wheel["package_name"] == "kafka_iceberg"
            assert wheel["entry_point"] in scripts, (key, wheel["entry_point"])
            args = wheel["parameters"]
            opts = dict(zip(args[::2], args[1::2], strict=True))
            pipeline = REPO / opts["--pipeline"].replace("${workspace.file_path}/", "")
            spec = load_pipeline(pipeline)
            assert opts["--env"] == "${bundle.target}"
            for target in TARGETS:
                env = load_environment(target, pipeline.parent)
                assert opts["--catalog"] in env.catalogs, (key, target)
            if wheel["entry_point"].startswith("ingest-"):
                fmt = wheel["entry_point"].removeprefix("ingest-")
                assert spec.tables_of_format(fmt), f"{key} runs {fmt} but {pipeline.name} has no {fmt} table"


def test_one_ingestion_job_per_format_in_use():
    spec = load_pipeline(REPO / "pipelines" / "shop.yml")
    formats = {t.source.format for t in spec.tables}
    entry_points = {task["python_wheel_task"]["entry_point"] for job in JOBS.values() for task in job["tasks"]}
    assert {f"ingest-{f}" for f in formats} <= entry_points
    assert "maintain-tables" in entry_points


def test_mutator_attaches_the_locked_maven_libraries_once():
    job = Job.from_dict(JOBS["ingest_flatten_lake"])
    mutated = with_runtime_libraries(job)
    coords = [lib.maven.coordinates for lib in mutated.tasks[0].libraries if lib.maven]
    assert coords == cluster_maven_coordinates()
    assert with_runtime_libraries(mutated) == mutated  # idempotent
    assert ROOT["python"]["mutators"] == ["kafka_iceberg.bundle:add_runtime_libraries"]
    assert add_runtime_libraries.resource_type is Job


def test_workflows_pass_schema_and_security_lint():
    workflows = sorted((REPO / ".github" / "workflows").glob("*.yml"))
    assert workflows
    schema = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, workflows)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert schema.returncode == 0, schema.stdout + schema.stderr
    zizmor = Path(sys.executable).parent / "zizmor"
    audit = subprocess.run(
        [str(zizmor), "--offline", *map(str, workflows)], capture_output=True, text=True, check=False
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_workflows_promote_dev_staging_prod():
    ci = yaml.safe_load((REPO / ".github/workflows/ci.yml").read_text())
    promote = yaml.safe_load((REPO / ".github/workflows/promote.yml").read_text())
    assert "pull_request" in ci[True]  # YAML 1.1 reads the `on` key as True
    assert any("make test" in s.get("run", "") for s in ci["jobs"]["test"]["steps"])
    assert any("deploy --target dev" in s.get("run", "") for s in ci["jobs"]["bundle"]["steps"])
    assert promote["jobs"]["staging"]["environment"] == "staging"
    assert "refs/heads/main" in promote["jobs"]["staging"]["if"]
    assert promote["jobs"]["prod"]["environment"] == "prod"
    assert "refs/tags/v" in promote["jobs"]["prod"]["if"]
