"""Environment files: the shipped ones parse, the local one matches the stack, problems are precise."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_iceberg.catalogs import render
from kafka_iceberg.environment import load_environment, missing_env_vars, parse_environment
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.local.profile import LOCAL_CATALOG, local_catalog_profile

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["local", "dev", "staging", "prod"])
def test_shipped_environments_parse(name):
    env = load_environment(name, REPO / "pipelines")
    assert env.name == name
    assert env.default_catalog in env.catalogs


def test_local_environment_renders_like_the_demo_profile():
    env = load_environment("local", REPO)
    assert render("lake", env.catalogs["lake"]).conf == render(LOCAL_CATALOG, local_catalog_profile()).conf


def test_workspace_environments_take_credentials_from_references_only():
    for name in ("dev", "staging", "prod"):
        text = (REPO / "environments" / f"{name}.yml").read_text()
        env = load_environment(name, REPO)
        for catalog in env.catalogs.values():
            for key, value in render("c", catalog).conf.items():
                if any(word in key for word in ("secret", "password", "credential", "token", "access-key")):
                    assert value.startswith("${"), f"{name}.yml: {key} holds a literal"
        assert "kafka" in text


def test_unknown_environment_lists_known_ones():
    with pytest.raises(ConfigError) as err:
        load_environment("qa", REPO)
    (problem,) = err.value.problems
    assert problem.code == "UNKNOWN_ENVIRONMENT" and "local" in problem.expected and "prod" in problem.expected


def test_all_problems_of_an_environment_file_are_reported_together():
    data = {
        "kafka": {"bootstrap_servers": "b", "reader": "carrier-pigeon"},
        "checkpoint_root": "/c",
        "default_catalog": "missing",
        "catalogs": {"lake": {"type": "rest", "uri": "${vault:x}"}, "bad": {"type": "oracle"}},
        "surprise": 1,
    }
    with pytest.raises(ConfigError) as err:
        parse_environment(data, file="environments/x.yml", name="x")
    by_path = {p.key_path: p for p in err.value.problems}
    assert by_path["kafka.reader"].code == "NOT_ALLOWED"
    assert "'spark'" in by_path["kafka.reader"].expected
    assert by_path["catalogs.lake.uri"].code == "BAD_REFERENCE"
    assert by_path["catalogs.bad.type"].code == "NOT_ALLOWED" or by_path["catalogs.bad"].code == "NOT_ALLOWED"
    assert by_path["surprise"].code == "UNKNOWN_KEY"
    assert all(p.file == "environments/x.yml" for p in err.value.problems)


def test_missing_env_vars_are_reported_with_their_key_path():
    env = load_environment("prod", REPO)
    problems = missing_env_vars(env, {})
    assert problems and all(p.code == "UNSET_ENV_VAR" for p in problems)
    assert any(p.key_path == "kafka.bootstrap_servers" for p in problems)


def test_references_in_spark_conf_are_resolved_before_the_session_starts(monkeypatch):
    from kafka_iceberg.environment import Environment
    from kafka_iceberg.run import prepared as runtime
    from kafka_iceberg.run import settings as resolution

    env = Environment.model_validate(
        {
            "kafka": {"bootstrap_servers": "127.0.0.1:9092"},
            "checkpoint_root": "/tmp/ck",
            "spark_conf": {"spark.sql.shuffle.partitions": "${env:KI_PARTS}", "spark.app.x": "plain"},
        }
    )
    seen = {}
    monkeypatch.setattr(runtime, "get_spark", lambda **kw: seen.update(kw["conf"]) or "session")
    monkeypatch.setattr(runtime, "attach_resolved", lambda *a: None)
    monkeypatch.setattr(runtime, "apply_run_defaults", lambda session: {})
    resolved = resolution.resolve(env, [], environ={"KI_PARTS": "7"})
    prepared = runtime.Prepared(env, (), resolved.rendered, resolved.sources, resolved.settings)
    assert runtime.open_session(prepared) == "session"
    assert seen == {"spark.sql.shuffle.partitions": "7", "spark.app.x": "plain"}


# -- what a run needs, project discovery, the built-in local environment (issue 18) -------------
CLUSTER_VARS = {
    "KAFKA_BOOTSTRAP_SERVERS": "k:9096",
    "KAFKA_ICEBERG_CHECKPOINT_ROOT": "s3://b/c",
    "AWS_REGION": "us-east-1",
    "S3TABLES_BUCKET_ARN": "arn:aws:s3tables:us-east-1:1:bucket/b",
    "SCHEMA_REGISTRY_URL": "https://registry.example.com",
}


def test_the_packaged_local_environment_is_environments_local_yml():
    from kafka_iceberg.environment import BUILTIN_LOCAL

    assert BUILTIN_LOCAL.read_bytes() == (REPO / "environments" / "local.yml").read_bytes()
    # Inside the package directory, which the wheel ships whole (pyproject: packages = ["src/kafka_iceberg"]).
    assert BUILTIN_LOCAL.is_relative_to(REPO / "src" / "kafka_iceberg")


def test_local_is_built_in_outside_any_project(tmp_path, monkeypatch):
    from kafka_iceberg.environment import BUILTIN_LOCAL, available_environments

    monkeypatch.chdir(tmp_path)
    env = load_environment("local", tmp_path)
    assert env.source_file == str(BUILTIN_LOCAL)
    assert available_environments(tmp_path) == ["local"]


def test_the_current_directory_project_comes_first(tmp_path, monkeypatch):
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "local.yml").write_text((REPO / "environments" / "local.yml").read_text())
    monkeypatch.chdir(REPO)
    assert load_environment("local", tmp_path).source_file == str(REPO / "environments" / "local.yml")
    monkeypatch.chdir(tmp_path)
    assert load_environment("local", tmp_path).source_file == str(tmp_path / "environments" / "local.yml")
    # An environment only the pipeline's project has is still found from elsewhere.
    monkeypatch.chdir(REPO)
    assert load_environment("qa", REPO / "fixtures" / "needs_env" / "pipelines").name == "qa"


def test_an_unknown_environment_lists_every_path_searched(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    pipeline_dir = tmp_path / "a" / "b"
    pipeline_dir.mkdir(parents=True)
    with pytest.raises(ConfigError) as err:
        load_environment("qa", pipeline_dir)
    (problem,) = err.value.problems
    assert (problem.code, problem.key_path, problem.value) == ("UNKNOWN_ENVIRONMENT", "--env", "qa")
    for directory in (REPO, pipeline_dir, tmp_path / "a", tmp_path):
        assert str(directory / "environments" / "qa.yml") in problem.expected


def test_a_run_needs_the_references_of_what_it_uses_only():
    from kafka_iceberg.environment import references

    env = load_environment("prod", REPO)
    used = {path for path, _ref in references(env, {"lake"})}
    unused = {path for path, _ref in references(env, {"lake"}, used=False)}
    assert {"kafka.bootstrap_servers", "kafka.sasl_password", "checkpoint_root", "catalogs.lake.region"} <= used
    assert not any(p.startswith(("catalogs.oss", "catalogs.polaris", "catalogs.glue")) for p in used)
    assert {"catalogs.oss.region", "catalogs.polaris.client_secret", "catalogs.glue.warehouse"} <= unused
    assert missing_env_vars(env, CLUSTER_VARS, {"lake"}) == []
    # The schema registry only when the run reads registry formats (ingest-avro, not ingest-json).
    no_registry = {k: v for k, v in CLUSTER_VARS.items() if k != "SCHEMA_REGISTRY_URL"}
    (registry,) = missing_env_vars(env, no_registry, {"lake"})
    assert (registry.key_path, registry.value) == ("schema_registry.url", "${env:SCHEMA_REGISTRY_URL}")
    assert missing_env_vars(env, no_registry, {"lake"}, registry=False) == []
    assert "schema_registry.url" not in {path for path, _ref in references(env, {"lake"}, registry=False)}
    assert {p.key_path for p in missing_env_vars(env, no_registry, {"lake"}, used=False, registry=False)} == {
        "schema_registry.url",
        "catalogs.oss.region",
        "catalogs.oss.table_bucket_arn",
        "catalogs.polaris.uri",
        "catalogs.polaris.warehouse",
        "catalogs.glue.warehouse",
    }


@pytest.mark.parametrize("target", ["dev", "staging", "prod"])
def test_validate_warns_about_unused_unset_variables_and_passes(target, monkeypatch):
    from kafka_iceberg.project import validate_project

    monkeypatch.chdir(REPO)
    report = validate_project(REPO / "pipelines" / "shop.yml", env_name=target, catalog="lake", environ=CLUSTER_VARS)
    assert report.problems == []
    assert {w.code for w in report.warnings} == {"UNSET_ENV_VAR"}
    assert {w.key_path.split(".")[1] for w in report.warnings} == {"oss", "polaris", "glue"}
    # A variable of what the run uses is still required.
    partial = {k: v for k, v in CLUSTER_VARS.items() if k != "S3TABLES_BUCKET_ARN"}
    report = validate_project(REPO / "pipelines" / "shop.yml", env_name=target, catalog="lake", environ=partial)
    assert [(p.code, p.key_path) for p in report.problems] == [("UNSET_ENV_VAR", "catalogs.lake.table_bucket_arn")]


def test_unused_catalogs_are_still_shape_checked(tmp_path, monkeypatch):
    from kafka_iceberg.project import validate_project

    (tmp_path / "environments").mkdir()
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "p.yml").write_text(
        "pipeline: p\ncatalog: lake\ntables:\n  - {name: t, namespace: n, source: {topics: [t], format: json}}\n"
    )
    (tmp_path / "environments" / "qa.yml").write_text(
        "kafka: {bootstrap_servers: 'b:9092'}\ncheckpoint_root: /c\n"
        "catalogs:\n  lake: {type: hadoop, warehouse: /w}\n  other: {type: hadoop, wharehouse: '${env:NOPE}'}\n"
    )
    monkeypatch.chdir(tmp_path)
    report = validate_project(tmp_path / "pipelines", env_name="qa", environ={})
    assert any(p.code == "UNKNOWN_KEY" and p.key_path.startswith("catalogs.other") for p in report.problems)


def test_the_event_log_catalog_is_used_when_enabled():
    from kafka_iceberg.environment import used_catalogs

    env = load_environment("prod", REPO)
    assert used_catalogs(env, {"glue"}) == {"glue", "lake"}
    disabled = env.model_copy(update={"event_log": env.event_log.model_copy(update={"enabled": False})})
    assert used_catalogs(disabled, {"glue"}) == {"glue"}
