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
    from kafka_iceberg import runtime
    from kafka_iceberg.environment import Environment
    from kafka_iceberg.refs import Resolver

    env = Environment.model_validate(
        {
            "kafka": {"bootstrap_servers": "127.0.0.1:9092"},
            "checkpoint_root": "/tmp/ck",
            "spark_conf": {"spark.sql.shuffle.partitions": "${env:KI_PARTS}", "spark.app.x": "plain"},
        }
    )
    seen = {}
    monkeypatch.setattr(runtime, "get_spark", lambda **kw: seen.update(kw["conf"]) or "session")
    monkeypatch.setattr(runtime, "attach_catalogs", lambda *a: None)
    prepared = runtime.Prepared(env, Resolver(env={"KI_PARTS": "7"}), [])
    assert runtime.open_session(prepared) == "session"
    assert seen == {"spark.sql.shuffle.partitions": "7", "spark.app.x": "plain"}
