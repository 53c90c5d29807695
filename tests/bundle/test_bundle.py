"""The bundle: every YAML file is valid for Databricks, and every job runs something that exists."""

from __future__ import annotations

import importlib.metadata
import re
import shlex
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
# `databricks bundle schema` of the CLI; CI overwrites it with the output of the CLI it pins.
SCHEMA = Path(__file__).resolve().parent / "databricks-bundle-schema.json"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
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
    assert SCHEMA.exists(), f"bundle JSON schema expected at {SCHEMA}"
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


def _target(name: str) -> dict[str, Any]:
    """A target as the CLI merges it: databricks.yml's block plus resources/env.<name>.yml's."""
    merged: dict[str, Any] = dict(ROOT["targets"][name])
    for path in BUNDLE_FILES[1:]:
        extra = ((yaml.safe_load(path.read_text()) or {}).get("targets") or {}).get(name) or {}
        for key, value in extra.items():
            merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
    return merged


def test_targets_follow_the_promotion_path():
    targets = ROOT["targets"]
    assert {"dev", "staging", "prod"} <= set(targets)  # more (a `local` target) may come
    assert targets["dev"]["mode"] == "development" and targets["dev"]["default"] is True
    for name in ("staging", "prod"):
        assert targets[name]["mode"] == "production"
        assert targets[name]["permissions"], name


def test_production_targets_run_as_their_service_principal_from_its_own_folder():
    for name in ("staging", "prod"):
        target = ROOT["targets"][name]
        principal = target["run_as"]["service_principal_name"]
        assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", principal), name  # an application id
        root = target["workspace"]["root_path"]
        assert not root.startswith("/Workspace/Shared"), name  # writable by every user
        # literal apart from bundle.name/target: `kafka-iceberg workspace` matches jobs by this path
        assert root == f"/Workspace/Users/{principal}/.bundle/${{bundle.name}}/${{bundle.target}}", name
        presets = target["presets"]
        assert presets["trigger_pause_status"] == "UNPAUSED", name
        assert presets["tags"]["environment"] == name
        assert "name_prefix" not in presets, name  # workspace.py matches production jobs by their bare name


def test_dev_copies_are_isolated_per_copy_and_paused():
    dev = _target("dev")
    assert dev["mode"] == "development"  # pauses every schedule and continuous job
    assert dev["presets"]["name_prefix"] == "[dev ${var.dev_copy}] "
    assert dev["presets"]["jobs_max_concurrent_runs"] == 1  # development mode would allow 4 writers
    assert dev["workspace"]["root_path"].endswith("/${bundle.target}/${var.dev_copy}")
    assert dev["variables"]["dev_copy"] == "${workspace.current_user.short_name}"
    assert "root_path" not in ROOT["targets"]["dev"].get("workspace", {})  # see resources/env.dev.yml
    assert "schedule_pause_status" not in ROOT["variables"]  # presets.trigger_pause_status instead


def test_every_variable_without_default_is_set_in_every_target_that_uses_it():
    declared = ROOT["variables"]
    required = {name for name, var in declared.items() if "default" not in var}
    shared = "\n".join(
        [yaml.safe_dump({k: v for k, v in ROOT.items() if k != "targets"})]
        + [p.read_text() for p in BUNDLE_FILES[1:] if not p.name.startswith("env.")]
    )
    used_by_all = set(re.findall(r"\$\{var\.([a-z_]+)\}", shared))
    for target in TARGETS:
        conf = _target(target)
        used = used_by_all | set(re.findall(r"\$\{var\.([a-z_]+)\}", yaml.safe_dump(conf)))
        missing = (required & used) - set(conf.get("variables", {}))
        assert not missing, f"target {target} leaves {missing} unset"


def test_variables_are_valued_only_under_targets():
    for path in BUNDLE_FILES[1:]:
        assert "variables" not in (yaml.safe_load(path.read_text()) or {}), path.name


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


def _schedule_kind(job: dict[str, Any]) -> str:
    kinds = [k for k in ("schedule", "continuous", "trigger") if k in job]
    assert len(kinds) == 1, kinds
    return kinds[0]


@pytest.mark.parametrize("key", sorted(JOBS))
def test_trigger_matches_the_tables_triggers(key):
    job = JOBS[key]
    for task in job["tasks"]:
        wheel = task["python_wheel_task"]
        if not wheel["entry_point"].startswith("ingest-"):
            continue
        opts = dict(zip(wheel["parameters"][::2], wheel["parameters"][1::2], strict=True))
        spec = load_pipeline(REPO / opts["--pipeline"].replace("${workspace.file_path}/", ""))
        tables = spec.tables_of_format(wheel["entry_point"].removeprefix("ingest-"))
        continuous = {t.trigger.processing_time is not None for t in tables}
        assert len(continuous) == 1, f"{key}: one job cannot run available_now and processing_time tables"
        assert _schedule_kind(job) == ("continuous" if continuous == {True} else "schedule"), key
    # the target's presets.trigger_pause_status decides, never the job
    assert "pause_status" not in (job.get("schedule") or job.get("continuous") or {}), key


@pytest.mark.parametrize("key", sorted(JOBS))
def test_jobs_have_limits_health_rules_and_notifications(key):
    job = JOBS[key]
    assert job["max_concurrent_runs"] == 1
    rules = {rule["metric"] for rule in job["health"]["rules"]}
    notes = job["email_notifications"]
    assert notes["on_failure"] == ["${var.notification_email}"]
    if _schedule_kind(job) == "continuous":  # restarted with backoff by Databricks: no retries, no timeout
        assert rules == {"STREAMING_BACKLOG_SECONDS"}
        assert notes["on_streaming_backlog_exceeded"]
        assert job["continuous"]["task_retry_mode"] == "ON_FAILURE"
        assert "timeout_seconds" not in job and all("max_retries" not in t for t in job["tasks"])
        assert not key.startswith("ingest_")  # `workspace smoke` would restart an always-on job
    else:
        assert rules == {"RUN_DURATION_SECONDS"}
        assert notes["on_duration_warning_threshold_exceeded"]
        assert job["queue"] == {"enabled": True}
        assert job["timeout_seconds"]
        assert all(t["max_retries"] >= 1 for t in job["tasks"])


def test_ingest_jobs_keep_the_names_workspace_commands_look_for():
    from kafka_iceberg.workspace import load_target

    for target in ("staging", "prod"):
        found = load_target(REPO, target)
        assert found.jobs == {k: f"kafka_iceberg_{k}" for k in JOBS if k.startswith("ingest_")}
        assert found.root_path and "${" not in found.root_path


SECRET_REF = re.compile(r"^\{\{secrets/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)\}\}$")
SENSITIVE = re.compile(r"(password|secret|token|access_key|credential|private_key)", re.I)


def test_secrets_reach_clusters_as_secret_references_under_the_resolvers_names():
    from kafka_iceberg.refs import secret_env_name

    env_vars = ROOT["variables"]["ingest_cluster"]["default"]["spark_env_vars"]
    secrets = {name: SECRET_REF.match(str(value)) for name, value in env_vars.items()}
    assert any(secrets.values())
    for name, match in secrets.items():
        if match:  # `${secret:scope/key}` in an environment file reads exactly this variable first
            assert name == secret_env_name(match[1], match[2]), name
        else:
            assert str(env_vars[name]).startswith("${var."), name


def test_job_clusters_set_the_avro_limits_the_jvm_decoder_needs():
    from kafka_iceberg.decode import avro_jvm

    conf = ROOT["variables"]["ingest_cluster"]["default"]["spark_conf"]
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert set(avro_jvm.LIMIT_OPTIONS) <= set(shlex.split(conf[key])), key


def test_no_secret_literal_in_the_bundle():
    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        elif isinstance(node, str) and SENSITIVE.search(path.rsplit(".", 1)[-1]):
            assert SECRET_REF.match(node) or node.startswith("${var."), f"{path}: a literal"

    for path in BUNDLE_FILES:
        text = path.read_text()
        walk(yaml.safe_load(text), path.name)
        assert not re.search(r"dapi[0-9a-f]{16,}|AKIA[0-9A-Z]{16}", text), path.name


def test_mutator_attaches_the_locked_maven_libraries_once():
    job = Job.from_dict(JOBS["ingest_flatten_lake"])
    mutated = with_runtime_libraries(job)
    coords = [lib.maven.coordinates for lib in mutated.tasks[0].libraries if lib.maven]
    assert coords == cluster_maven_coordinates()
    assert with_runtime_libraries(mutated) == mutated  # idempotent
    assert ROOT["python"]["mutators"] == ["kafka_iceberg.bundle:add_runtime_libraries"]
    assert add_runtime_libraries.resource_type is Job


def test_workflows_pass_schema_and_security_lint():
    workflows = WORKFLOWS
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


def _workflow(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())


def _runs(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_workflows_promote_dev_staging_prod():
    ci, promote = _workflow("ci.yml"), _workflow("promote.yml")
    assert "pull_request" in ci[True]  # YAML 1.1 reads the `on` key as True
    assert "make test" in _runs(ci["jobs"]["test"])
    validate = ci["jobs"]["validate"]
    assert {e["target"] for e in validate["strategy"]["matrix"]["include"]} == {"dev", "staging", "prod"}
    assert _runs(validate)[-1] == 'databricks bundle validate --target "$TARGET"'
    deploy = ci["jobs"]["deploy-dev"]
    assert 'databricks bundle deploy --target dev --var "dev_copy=pr-$PR_NUMBER"' in _runs(deploy)
    assert deploy["concurrency"]["group"] == "bundle-dev-pr-${{ github.event.pull_request.number }}"
    assert "dev_copy=pr-$PR_NUMBER" in _runs(ci["jobs"]["destroy-dev"])[-1]
    assert promote["jobs"]["staging"]["environment"] == "staging"
    assert "refs/heads/main" in promote["jobs"]["staging"]["if"]
    assert promote["jobs"]["prod"]["environment"] == "prod"
    assert "refs/tags/v" in promote["jobs"]["prod"]["if"]


def test_deploys_are_serialised_per_target_not_per_ref():
    promote = _workflow("promote.yml")
    assert "concurrency" not in promote
    for target in ("staging", "prod"):
        assert promote["jobs"][target]["concurrency"] == {"group": f"bundle-{target}", "cancel-in-progress": False}


def test_one_wheel_is_built_and_every_deploy_uses_it():
    for name in ("ci.yml", "promote.yml"):
        jobs = _workflow(name)["jobs"]
        assert "python -m pip wheel --no-deps --wheel-dir dist ." in _runs(jobs["wheel"])
        for key, job in jobs.items():
            if any("bundle deploy" in r for r in _runs(job)):
                assert "wheel" in job["needs"], (name, key)
                fetch = [s for s in job["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
                assert fetch and fetch[0]["with"] == {"name": "wheel", "path": "dist"}, (name, key)
                assert not any("pip wheel" in r or "bundle build" in r for r in _runs(job)), (name, key)
    assert "artifacts" not in ROOT  # `bundle deploy` builds nothing: it uploads ../dist/*.whl


def test_workflows_pin_a_cli_the_python_bundle_support_accepts():
    text = importlib.metadata.metadata("databricks-bundles").get_payload()  # type: ignore[attr-defined]
    required = re.search(r"CLI\]\([^)]*\), version ([0-9.]+) or above", text)
    minimum = required[1] if required else importlib.metadata.version("databricks-bundles")
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        pinned = doc["env"]["DATABRICKS_CLI_VERSION"]
        assert tuple(map(int, pinned.split("."))) >= tuple(map(int, minimum.split("."))), (path.name, minimum)
        for job in doc["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").startswith("databricks/setup-cli@"):
                    assert step["with"]["version"] == "${{ env.DATABRICKS_CLI_VERSION }}", path.name


def test_tests_regenerate_the_bundle_schema_with_the_pinned_cli_first():
    for name in ("ci.yml", "promote.yml"):
        runs = _runs(_workflow(name)["jobs"]["test"])
        schema = runs.index("databricks bundle schema > tests/bundle/databricks-bundle-schema.json")
        assert schema < runs.index("make test"), name


def test_test_job_has_java_python_and_caches():
    test = _workflow("ci.yml")["jobs"]["test"]
    uses = {s["uses"].split("@")[0]: s.get("with", {}) for s in test["steps"] if "uses" in s}
    assert uses["actions/setup-java"]["java-version"] == "17"
    assert uses["actions/setup-python"]["python-version"] == "3.11"
    assert uses["actions/setup-python"]["cache"] == "pip"
    assert uses["actions/setup-python"]["cache-dependency-path"] == "requirements-dev.txt"
    assert uses["actions/cache"]["path"] == "~/.cache/kafka-iceberg"
    assert "src/kafka_iceberg/jars.lock.toml" in uses["actions/cache"]["key"]


# Paths a step may name outside the checkout: the runner's own cache and home.
RUNNER_PATHS = ("~/.cache/", "$HOME/", "${HOME}/")
# Made by the steps themselves (make venv, the wheel job, the downloaded artifact).
GENERATED = {".venv", "dist"}
COMMANDS = {"make", "databricks", "python", ".venv/bin/kafka-iceberg"}


def _path_problem(token: str) -> str | None:
    if token.startswith(RUNNER_PATHS) or token.startswith(("http://", "https://", "-", "$")) or "/" not in token:
        return None
    if token.startswith(("/", "~")) or ".." in token.split("/") or "/work" in token:
        return "outside the repository"
    top = token.split("/", maxsplit=1)[0]
    if top not in GENERATED and not (REPO / top).exists():
        return "not a file of the repository"
    return None


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_step_depends_on_a_path_outside_the_repository(path):
    text = path.read_text()
    assert "../" not in text and "/work/" not in text and "shared/" not in text
    for key, job in yaml.safe_load(text)["jobs"].items():
        for step in job["steps"]:
            for value in map(str, (step.get("with") or {}).values()):
                for hashed in re.findall(r"hashFiles\('([^']+)'\)", value):
                    assert (REPO / hashed).is_file(), (path.name, key, value)
                for token in re.sub(r"\$\{\{.*?\}\}", "", value).split():
                    assert _path_problem(token) is None, (path.name, key, value)
            if "run" not in step:
                continue
            for line in step["run"].splitlines():
                words = shlex.split(line, comments=True)
                if not words:
                    continue
                assert words[0] in COMMANDS, (path.name, key, line)  # only the repository's tools
                for word in words:
                    target = word.lstrip(">")
                    problem = _path_problem(target)
                    assert problem is None, f"{path.name}: {key}: {line}: {target} is {problem}"
                    if target.endswith((".txt", ".toml", ".json", ".yml")) and "/" in target:
                        assert (REPO / target).parent.is_dir(), (path.name, line)
