"""`kafka-iceberg validate`: a catalogue of broken specs, each rejected with an actionable message,
exit code 2 and no stack trace; valid projects pass without a JVM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafka_iceberg.project import validate_project

REPO = Path(__file__).resolve().parents[2]
BROKEN = REPO / "fixtures" / "broken"
CLI = [sys.executable, "-m", "kafka_iceberg.cli.main"]


@pytest.mark.parametrize(
    ("name", "key_path", "code", "message_part"),
    [
        ("unknown_key.yml", "tables[0].comit_mode", "UNKNOWN_KEY", "commit_mode"),
        ("wrong_type.yml", "tables[0].source.max_records_per_batch", "WRONG_TYPE", "an integer"),
        ("upsert_without_keys.yml", "tables[0].key_fields", "MISSING_KEY", "commit_mode is upsert"),
        ("bad_partition.yml", "tables[0].partitioning", "INVALID_VALUE", "bucket(N, col) with N a positive integer"),
        ("hyphenated_name.yml", "tables[0].name", "INVALID_VALUE", "reject '-'"),
        ("unknown_catalog.yml", "tables[0].catalog", "UNKNOWN_CATALOG", "lake"),
    ],
)
def test_broken_spec_is_rejected_with_file_key_value_and_allowed(name, key_path, code, message_part):
    report = validate_project(BROKEN / name, env_name="local", check_bundle=False)
    matching = [p for p in report.problems if p.key_path == key_path]
    assert matching, [str(p) for p in report.problems]
    problem = matching[0]
    assert problem.code == code
    assert problem.file.endswith(name) or problem.file.endswith("broken/" + name)
    assert message_part in problem.expected

    result = subprocess.run([*CLI, "validate", "--pipeline", str(BROKEN / name)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{name}: {key_path}: got " in result.stderr


def test_missing_environment_variable_is_named(monkeypatch):
    monkeypatch.delenv("KI_TEST_BOOTSTRAP", raising=False)
    monkeypatch.setenv("KI_TEST_WAREHOUSE", "/tmp/wh")
    report = validate_project(REPO / "fixtures" / "needs_env" / "pipelines", env_name="qa", check_bundle=False)
    (problem,) = report.problems
    assert problem.code == "UNSET_ENV_VAR"
    assert problem.key_path == "kafka.bootstrap_servers"
    assert "KI_TEST_BOOTSTRAP" in problem.expected
    monkeypatch.setenv("KI_TEST_BOOTSTRAP", "b:9092")
    assert validate_project(REPO / "fixtures" / "needs_env" / "pipelines", env_name="qa").problems == []


def test_unknown_environment_lists_the_known_ones():
    report = validate_project(REPO / "pipelines", env_name="qa")
    (problem,) = [p for p in report.problems if p.key_path == "--env"]
    assert "local" in problem.expected and "prod" in problem.expected


def test_shipped_project_is_valid_and_validate_starts_no_jvm():
    code = (
        "import sys\n"
        "from kafka_iceberg.cli.main import main\n"
        "rc = main(['validate', '--pipeline', 'pipelines'])\n"
        "assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules, 'validate imported Spark'\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid: 2 pipeline file(s), 8 table(s)" in result.stdout  # shop.yml, live.yml
    assert "12 bundle file(s)" in result.stdout


def test_every_example_pipeline_validates():
    report = validate_project(REPO / "fixtures" / "pipelines", env_name="local", check_bundle=False)
    assert report.problems == []
    assert {t.source.format for p in report.pipelines for t in p.tables} == {"text", "csv", "json", "flatten", "binary"}


def test_bundle_problems_are_reported(tmp_path, monkeypatch):
    import shutil

    for item in ("databricks.yml", "resources", "pipelines", "environments"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / item)
    job = tmp_path / "resources" / "ingest_json_lake.job.yml"
    job.write_text(job.read_text().replace("ingest-json", "ingest-jsonn").replace("- lake", "- lakehouse"))
    monkeypatch.chdir(tmp_path)  # the project is found from the current directory first
    report = validate_project(tmp_path / "pipelines", env_name="local")
    codes = {p.code for p in report.problems}
    assert {"UNKNOWN_ENTRY_POINT", "UNKNOWN_CATALOG"} <= codes
    assert all(p.file.endswith("ingest_json_lake.job.yml") for p in report.problems if p.code == "UNKNOWN_ENTRY_POINT")


def test_an_unexpected_failure_is_one_line_without_secrets(capsys):
    from kafka_iceberg.cli.output import EXIT_FAILED, run_guarded
    from kafka_iceberg.refs import register_secret

    register_secret("sup3r-s3cret-token")

    def boom() -> int:
        raise RuntimeError(
            "java.lang.IllegalStateException: cannot reach catalog with token sup3r-s3cret-token\n\tat x.y"
        )

    assert run_guarded(boom) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "IllegalStateException: cannot reach catalog" in err and "Traceback" not in err
    assert "sup3r-s3cret-token" not in err and "-v for the stack trace" in err


# -- works from anywhere (issue 18) -------------------------------------------------------------
def _package_only_env():
    """The environment of a user's shell: PYTHONPATH gives the package under test alone (as an
    installed wheel would), never the project root; with ``python -P`` the current directory is
    not importable either."""
    import os

    import kafka_iceberg

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, "PYTHONPATH": str(Path(kafka_iceberg.__file__).resolve().parents[1])}


def test_transform_and_definitions_modules_import_from_the_project_root_without_pythonpath():
    result = subprocess.run(
        [sys.executable, "-P", "-m", "kafka_iceberg.cli.main", "validate", "--pipeline", "fixtures/pipelines"],
        capture_output=True, text=True, cwd=REPO, env=_package_only_env(), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "9 pipeline file(s)" in result.stdout


@pytest.mark.parametrize("where", ["project_root", "elsewhere"])
def test_a_pipeline_outside_the_project_validates_against_local(where, tmp_path, monkeypatch):
    from kafka_iceberg.cli.main import main
    from kafka_iceberg.environment import BUILTIN_LOCAL

    pipeline = tmp_path / "x" / "p.yml"
    pipeline.parent.mkdir()
    pipeline.write_text((REPO / "fixtures" / "pipelines" / "text.yml").read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cwd = REPO if where == "project_root" else elsewhere
    monkeypatch.chdir(cwd)
    report = validate_project(pipeline, env_name="local")
    assert report.problems == []
    (local,) = [e for e in report.environments if e.name == "local"]
    expected = REPO / "environments" / "local.yml" if where == "project_root" else BUILTIN_LOCAL
    assert local.source_file == str(expected)
    assert main(["validate", "--pipeline", str(pipeline), "--env", "local"]) == 0


def test_an_unknown_environment_exits_2_listing_what_was_searched(tmp_path, monkeypatch, capsys):
    from kafka_iceberg.cli.main import main

    pipeline = tmp_path / "p.yml"
    pipeline.write_text((REPO / "fixtures" / "pipelines" / "text.yml").read_text())
    monkeypatch.chdir(REPO)
    assert main(["validate", "--pipeline", str(pipeline), "--env", "qa"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(REPO / "environments" / "qa.yml") in err and str(tmp_path / "environments" / "qa.yml") in err


# -- the environment's schema registry (issue 22) -------------------------------------------------
PROD_CLUSTER = {
    "KAFKA_BOOTSTRAP_SERVERS": "k:9096",
    "KAFKA_ICEBERG_CHECKPOINT_ROOT": "s3://b/c",
    "AWS_REGION": "us-east-1",
    "S3TABLES_BUCKET_ARN": "arn:aws:s3tables:us-east-1:1:bucket/b",
}


def test_only_runs_of_registry_formats_need_the_registry_url():
    shop = REPO / "pipelines" / "shop.yml"
    json_run = validate_project(shop, env_name="prod", environ=PROD_CLUSTER, formats={"json"}, check_bundle=False)
    assert json_run.problems == []
    (warning,) = [w for w in json_run.warnings if w.key_path == "schema_registry.url"]
    assert warning.hint == "no table of this run reads a schema registry"
    avro_run = validate_project(shop, env_name="prod", environ=PROD_CLUSTER, formats={"avro"}, check_bundle=False)
    (problem,) = avro_run.problems
    assert (problem.code, problem.key_path) == ("UNSET_ENV_VAR", "schema_registry.url")
    assert "SCHEMA_REGISTRY_URL" in problem.expected
    environ = {**PROD_CLUSTER, "SCHEMA_REGISTRY_URL": "https://registry.example.com"}
    assert validate_project(shop, env_name="prod", environ=environ, formats={"avro"}, check_bundle=False).problems == []


AVRO_TABLE = """
pipeline: p
catalog: lake
tables:
  - name: t
    namespace: n
    source: {{topics: [t], format: avro{own}}}
"""


def test_a_registry_format_without_any_registry_names_both_places_to_set_one(tmp_path, monkeypatch):
    from kafka_iceberg.cli.main import main
    from tests.support.project import project

    bare = (REPO / "environments" / "local.yml").read_text().split("schema_registry:")[
        0
    ] + "event_log: {enabled: false}\n"
    path = project(tmp_path, AVRO_TABLE.format(own=""), extra_env={"bare": bare})
    monkeypatch.chdir(tmp_path)
    report = validate_project(path, env_name="local", check_bundle=False)
    (problem,) = report.problems
    assert (problem.code, problem.file, problem.key_path) == (
        "MISSING_KEY",
        str(path),
        "tables[0].source.schema_registry",
    )
    assert str(tmp_path / "environments" / "bare.yml") in problem.expected
    assert "source.avro.schema_file" in problem.expected
    assert main(["validate", "--pipeline", str(path)]) == 2
    path.write_text(AVRO_TABLE.format(own=', schema_registry: {url: "http://registry:8081"}'))
    assert validate_project(path, env_name="bare", check_bundle=False).problems == []
