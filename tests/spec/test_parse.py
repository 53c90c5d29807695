"""Pipeline files parse into typed models; every mistake is reported with file, key path,
value and what is allowed — all problems of a file at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_iceberg.errors import ConfigError
from kafka_iceberg.spec.load import load_pipeline, parse_pipeline
from kafka_iceberg.spec.model import parse_duration

REPO = Path(__file__).resolve().parents[2]


def table(**overrides):
    base = {"name": "orders", "namespace": "sales", "source": {"topics": ["orders"], "format": "json"}}
    base.update(overrides)
    return base


def problems(data, file="p.yml"):
    with pytest.raises(ConfigError) as err:
        parse_pipeline(data, file=file)
    return {p.key_path: p for p in err.value.problems}


def test_defaults_follow_the_product_contract():
    spec = parse_pipeline({"pipeline": "p", "tables": [table()]}, file="p.yml").tables[0]
    assert spec.source.format == "json" and spec.source.effective_mode == "value"
    assert spec.source.starting_offsets == "earliest" and spec.source.max_records_per_batch == 100_000
    assert spec.partition_window == "hour" and spec.partitioning == []
    assert spec.commit_mode == "append" and spec.schema_evolution == "add_columns"
    assert spec.write.target_file_size_mb == 128 and spec.write.compression == "zstd"
    assert spec.trigger.available_now is True
    m = spec.maintenance
    assert (m.compaction.target_file_size_mb, m.expire_snapshots.older_than_days, m.expire_snapshots.retain_last) == (
        256,
        10,
        1,
    )
    assert m.orphan_files.older_than_days == 4
    text = parse_pipeline({"pipeline": "p", "tables": [table(source={"topics": ["t"]})]}, file="p.yml").tables[0]
    assert text.source.format == "text" and text.source.effective_mode == "default"


def test_product_example_parses_including_flow_style_bucket():
    spec = load_pipeline(REPO / "fixtures" / "pipelines" / "product_example.yml")
    (orders,) = spec.tables
    assert orders.partitioning == ["bucket(16, id)"]
    assert orders.partition_fields[0].sql() == "bucket(16, id)"
    assert orders.expectations["valid_id"].on_violation == "quarantine"
    assert orders.errors.quarantine_table == "sales.orders_quarantine"


def test_unknown_key_lists_allowed_keys():
    found = problems({"pipeline": "p", "tables": [table(comit_mode="upsert")]})
    p = found["tables[0].comit_mode"]
    assert p.code == "UNKNOWN_KEY" and "commit_mode" in p.expected and p.file == "p.yml"


def test_wrong_type_and_not_allowed_values():
    found = problems(
        {"pipeline": "p", "tables": [table(source={"topics": ["t"], "format": "xml", "max_records_per_batch": "many"})]}
    )
    assert found["tables[0].source.format"].code == "NOT_ALLOWED"
    assert "'flatten'" in found["tables[0].source.format"].expected
    assert found["tables[0].source.max_records_per_batch"].code == "WRONG_TYPE"


def test_hyphenated_names_are_rejected_with_the_reason():
    found = problems({"pipeline": "p", "tables": [table(name="order-events", namespace="sales-eu")]})
    for key in ("tables[0].name", "tables[0].namespace"):
        assert "'-'" in found[key].expected and "S3 Tables" in found[key].expected


def test_impossible_combinations():
    found = problems(
        {
            "pipeline": "p",
            "tables": [
                table(commit_mode="upsert"),
                table(name="b", source={"topics": ["t"], "format": "csv", "mode": "default"}),
                table(name="c", source={"topics": ["t"], "format": "flatten"}, schema_evolution="strict"),
                table(name="d", expectations={"x": {"expr": "true", "on_violation": "quarantine"}}),
                table(name="e", errors={"error_topic": "orders"}),
            ],
        }
    )
    assert found["tables[0].key_fields"].code == "MISSING_KEY"
    assert found["tables[1].source.mode"].code == "IMPOSSIBLE_COMBINATION"
    assert found["tables[1].schema"].code == "MISSING_KEY"  # csv needs typed columns
    assert found["tables[2].schema_evolution"].code == "IMPOSSIBLE_COMBINATION"
    assert found["tables[3].expectations.x.on_violation"].code == "IMPOSSIBLE_COMBINATION"
    assert found["tables[4].errors.error_topic"].code == "IMPOSSIBLE_COMBINATION"


def test_bad_partition_transforms_name_the_entry():
    cols = {"columns": {"id": "long", "name": "string", "score": "double"}}
    flatten = {"topics": ["t"], "format": "flatten"}
    found = problems(
        {
            "pipeline": "p",
            "tables": [
                table(source=flatten, schema=cols, partitioning=["id", "bucket(0, id)"]),
                table(name="b", source=flatten, schema=cols, partitioning=["days(name)", "bucket(8, score)"]),
                table(name="c", source=flatten, schema=cols, partitioning=["ghost"]),
                table(name="d", source=flatten, schema=cols, partitioning=["zorder(id)"]),
            ],
        }
    )
    assert "positive integer" in found["tables[0].partitioning"].expected
    assert "name is string" in found["tables[1].partitioning[0]"].expected
    assert "score is double" in found["tables[1].partitioning[1]"].expected
    assert found["tables[2].partitioning[0]"].code == "BAD_PARTITION"
    assert "bucket(N, col)" in found["tables[3].partitioning"].expected


def test_every_problem_of_a_file_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        load_pipeline(REPO / "fixtures" / "broken" / "many_mistakes.yml")
    paths = {p.key_path for p in err.value.problems}
    assert {
        "pipeline",
        "tables[0].name",
        "tables[0].source.format",
        "tables[1].commit_mode",
        "tables[2].partitioning[0]",
        "tables[2].write.compression",
    } <= paths
    text = str(err.value)
    assert text.count("many_mistakes.yml: ") == len(err.value.problems)


def test_column_types_and_reserved_names():
    found = problems(
        {
            "pipeline": "p",
            "tables": [
                table(
                    source={"topics": ["t"], "format": "flatten"}, schema={"columns": {"id": "bigint", "v": "varchar"}}
                ),
                table(name="b", source={"topics": ["t"], "format": "flatten"}, schema={"columns": {"offset": "long"}}),
            ],
        }
    )
    assert "decimal(p,s)" in found["tables[0].schema.columns"].expected
    assert found["tables[1].schema.columns.offset"].code == "RESERVED_COLUMN"
    ok = parse_pipeline(
        {
            "pipeline": "p",
            "tables": [
                table(
                    source={"topics": ["t"], "format": "csv"},
                    schema={"columns": {"a": "BIGINT", "p": "decimal(10, 2)"}},
                )
            ],
        },
        file="p.yml",
    )
    assert ok.tables[0].schema_.columns == {"a": "long", "p": "decimal(10,2)"}


def test_yaml_syntax_error_names_the_line(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("pipeline: p\ntables:\n  - name: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_pipeline(bad)
    (problem,) = err.value.problems
    assert problem.code == "YAML_SYNTAX" and problem.key_path.startswith("line ")


@pytest.mark.parametrize(
    ("text", "seconds"), [("1 minute", 60), ("30 seconds", 30), ("PT5M", 300), ("PT1H30M", 5400), ("P1D", 86400)]
)
def test_trigger_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_trigger_needs_exactly_one_kind():
    found = problems(
        {"pipeline": "p", "tables": [table(trigger={"available_now": True, "processing_time": "1 minute"})]}
    )
    assert "exactly one" in found["tables[0].trigger"].expected
    found = problems({"pipeline": "p", "tables": [table(trigger={"processing_time": "soon"})]})
    assert "PT5M" in found["tables[0].trigger.processing_time"].expected


def test_maintenance_off_is_understood():
    spec = parse_pipeline({"pipeline": "p", "tables": [table(maintenance=False)]}, file="p.yml").tables[0]
    assert spec.maintenance.enabled is False


def test_unquoted_reference_in_a_flow_mapping_gets_a_hint(tmp_path):
    bad = tmp_path / "env.yml"
    bad.write_text("catalogs:\n  lake: {type: hadoop, warehouse: ${env:WH}}\n")
    with pytest.raises(ConfigError) as err:
        load_pipeline(bad)
    assert "quote ${...} references" in str(err.value)


def test_the_arrow_decoder_is_refused_where_it_cannot_decode_with_its_reason():
    strict = table(
        source={"topics": ["t"], "format": "flatten", "decoder": "arrow"},
        schema={"columns": {"id": "long"}},
        schema_evolution="strict",
    )
    parse_pipeline({"pipeline": "p", "tables": [strict]}, file="p.yml")  # accepted
    found = problems({"pipeline": "p", "tables": [{**strict, "schema_evolution": "add_columns"}]})
    problem = found["tables[0].source.decoder"]
    assert problem.code == "IMPOSSIBLE_COMBINATION" and "schema_evolution strict" in problem.expected
