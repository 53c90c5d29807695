"""Decorators build the same validated TableSpec a YAML file does, and need no Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

import kafka_iceberg as ki
from kafka_iceberg.errors import ConfigError
from kafka_iceberg.spec.api import resolve_transform
from kafka_iceberg.spec.load import load_pipeline, parse_pipeline

REPO = Path(__file__).resolve().parents[2]


def test_decorated_table_equals_the_yaml_table():
    registry = ki.ListRegistry()
    with ki.registration_context(registry):

        @ki.table(namespace="sales", source={"topics": ["orders"], "format": "json"}, commit_mode="append")
        @ki.expect_or_drop("has_value", "value IS NOT NULL")
        def orders(df):
            return df

    (spec,) = registry.tables
    yaml_spec = parse_pipeline(
        {
            "pipeline": "p",
            "tables": [
                {
                    "name": "orders",
                    "namespace": "sales",
                    "source": {"topics": ["orders"], "format": "json"},
                    "expectations": {"has_value": {"expr": "value IS NOT NULL", "on_violation": "drop"}},
                }
            ],
        },
        file="p.yml",
    ).tables[0]
    assert spec.model_dump(exclude={"transform"}) == yaml_spec.model_dump(exclude={"transform"})
    assert spec.defined_at.file == __file__ and spec.defined_at.line is not None
    assert resolve_transform(spec.transform) is orders


def test_each_expectation_decorator_sets_its_action_in_declaration_order():
    registry = ki.ListRegistry()
    with ki.registration_context(registry):

        @ki.table(namespace="n", source={"topics": ["t"]}, errors={"quarantine_table": "n.q"})
        @ki.expect("a", "true")
        @ki.expect_or_drop("b", "true")
        @ki.expect_or_quarantine("c", "true")
        @ki.expect_or_fail("d", "true")
        def t(df):
            return df

    exps = registry.tables[0].expectations
    assert list(exps) == ["a", "b", "c", "d"]
    assert [e.on_violation for e in exps.values()] == ["warn", "drop", "quarantine", "fail"]


def test_decorator_outside_a_pipeline_fails_at_once():
    with pytest.raises(ConfigError) as err:

        @ki.table(namespace="n", source={"topics": ["t"]})
        def lonely(df):
            return df

    assert err.value.problems[0].code == "TABLE_DEFINED_OUTSIDE_OF_PIPELINE"


def test_invalid_decorator_arguments_name_the_python_file_and_line():
    registry = ki.ListRegistry()
    with pytest.raises(ConfigError) as err, ki.registration_context(registry):

        @ki.table(namespace="bad-ns", source={"topics": ["t"], "format": "parquet"})
        def broken(df):
            return df

    by_path = {p.key_path: p for p in err.value.problems}
    assert set(by_path) == {"@table broken.namespace", "@table broken.source.format"}
    assert all(p.file.startswith(__file__ + ":") for p in err.value.problems)
    assert registry.tables == []


def test_expectation_above_table_is_refused():
    registry = ki.ListRegistry()
    with pytest.raises(ConfigError) as err, ki.registration_context(registry):

        @ki.expect("late", "true")
        @ki.table(namespace="n", source={"topics": ["t"]})
        def t(df):
            return df

    assert err.value.problems[0].code == "DECORATOR_ORDER"


def test_pipeline_file_with_definitions_and_a_yaml_transform():
    pipeline = load_pipeline(REPO / "fixtures" / "pipelines" / "decorated.yml")
    by_name = {t.name: t for t in pipeline.tables}
    assert set(by_name) == {"events", "orders_py"}
    orders = by_name["orders_py"]
    assert orders.catalog == "lake"  # the pipeline's default catalog
    assert list(orders.expectations) == ["positive_amount", "has_name"]
    assert orders.expectations["positive_amount"].on_violation == "drop"
    assert callable(resolve_transform(orders.transform))
    events = resolve_transform(by_name["events"].transform)
    assert events.__name__ == "keep_checkout_events"


def test_unknown_transform_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        resolve_transform("fixtures.pipelines.transforms:nope")
    assert err.value.problems[0].code == "UNKNOWN_TRANSFORM"
