"""Planning without a JVM: schema differences, what each evolution mode allows, and the DDL of a plan."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_iceberg.errors import ConfigError, SchemaMismatchError
from kafka_iceberg.write.plan import TableState, build_plan, check_identifiers
from kafka_iceberg.write.schema import diff_schema, sql_type
from tests.write.conftest import make_spec


def struct(*fields: tuple[str, object] | tuple[str, object, bool]) -> StructType:
    return StructType([StructField(f[0], f[1], f[2] if len(f) > 2 else True) for f in fields])  # type: ignore[arg-type]


TABLE = struct(
    ("id", LongType()),
    ("name", StringType()),
    ("info", struct(("city", StringType()))),
    ("qty", IntegerType()),
    ("price", FloatType()),
    ("amount", DecimalType(10, 2)),
)


def existing(schema: StructType = TABLE, **kw: object) -> TableState:
    return TableState(namespace_exists=True, exists=True, schema=schema, **kw)  # type: ignore[arg-type]


# -- differences ---------------------------------------------------------------------------------
def test_an_identical_or_narrower_batch_needs_nothing():
    narrower = struct(
        ("id", IntegerType()),
        ("name", StringType()),
        ("qty", IntegerType()),
        ("price", FloatType()),
        ("amount", DecimalType(8, 2)),
        ("_ki_tombstone", NullType()),
    )
    assert diff_schema(TABLE, TABLE).empty
    assert diff_schema(TABLE, narrower).empty  # int into long, decimal(8,2) into decimal(10,2), missing columns


def test_new_top_level_and_nested_fields_are_additions():
    batch = struct(
        ("id", LongType()),
        ("info", struct(("city", StringType()), ("zip", StringType()))),
        ("tags", ArrayType(StringType())),
        ("_ki_tombstone", NullType()),
    )
    diff = diff_schema(TABLE, batch)
    assert [(a.path, sql_type(a.data_type)) for a in diff.add] == [
        (("info", "zip"), "STRING"),
        (("tags",), "ARRAY<STRING>"),
    ]
    assert not diff.widen and not diff.incompatible


def test_wider_types_required_columns_and_incompatible_types():
    table = struct(
        ("id", LongType(), False),
        ("qty", IntegerType()),
        ("price", FloatType()),
        ("amount", DecimalType(10, 2)),
        ("ts", TimestampType()),
        ("code", LongType()),
    )
    batch = struct(
        ("id", LongType(), True),
        ("qty", LongType()),
        ("price", DoubleType()),
        ("amount", DecimalType(12, 2)),
        ("ts", StringType()),
        ("code", StringType()),
    )
    diff = diff_schema(table, batch)
    assert [(w.path, sql_type(w.to_type)) for w in diff.widen] == [
        (("qty",), "BIGINT"),
        (("price",), "DOUBLE"),
        (("amount",), "DECIMAL(12,2)"),
    ]
    assert [o.path for o in diff.optional] == [("id",)]
    assert [i.path for i in diff.incompatible] == [("ts",), ("code",)]


def test_a_required_column_missing_from_the_batch_must_become_optional():
    table = struct(("id", LongType(), False), ("name", StringType(), False))
    assert [o.path for o in diff_schema(table, struct(("id", LongType(), False))).optional] == [("name",)]


def test_names_match_case_insensitively():
    assert diff_schema(TABLE, struct(("ID", LongType()), ("Info", struct(("CITY", StringType()))))).empty


@pytest.mark.parametrize(
    ("mode", "refused"),
    [
        ("strict", ["qty", "name", "extra"]),
        ("add_columns", ["qty", "name"]),
        ("full", []),
    ],
)
def test_each_mode_refuses_what_it_should(mode, refused):
    table = struct(("id", LongType()), ("qty", IntegerType()), ("name", StringType(), False))
    batch = struct(("id", LongType()), ("qty", LongType()), ("name", StringType()), ("extra", StringType()))
    assert [".".join(r.path) for r in diff_schema(table, batch).refusals(mode)] == refused


def test_incompatible_types_are_refused_even_under_full():
    diff = diff_schema(struct(("id", LongType())), struct(("id", StringType())))
    (refusal,) = diff.refusals("full")
    assert refusal.path == ("id",) and "BIGINT" in refusal.reason and "STRING" in refusal.reason


# -- plans ---------------------------------------------------------------------------------------
BATCH = struct(("id", LongType()), ("name", StringType()), ("ts", TimestampType()), ("_ki_tombstone", NullType()))


def test_a_missing_table_is_created_with_partitions_sort_order_and_properties():
    spec = make_spec(
        namespace="sales",
        name="orders",
        partitioning=["days(ts)", "bucket(16, id)", "name"],
        write={
            "sort_order": ["id DESC"],
            "compression": "none",
            "target_file_size_mb": 64,
            "properties": {"write.metadata.previous-versions-max": "5"},
        },
    )
    plan = build_plan(spec, "lake.sales.orders", TableState(namespace_exists=False, exists=False), BATCH)
    # bucket(16, id) is on the first column: SeaweedFS refuses that at CREATE, so fields are added after.
    assert plan.statements() == (
        "CREATE NAMESPACE IF NOT EXISTS `lake`.`sales`",
        "CREATE TABLE `lake`.`sales`.`orders` (`id` BIGINT, `name` STRING, `ts` TIMESTAMP) USING iceberg "
        "TBLPROPERTIES ('format-version'='2', 'write.target-file-size-bytes'='67108864', "
        "'write.parquet.compression-codec'='uncompressed', "
        "'write.metadata.previous-versions-max'='5')",
        "ALTER TABLE `lake`.`sales`.`orders` ADD PARTITION FIELD days(`ts`)",
        "ALTER TABLE `lake`.`sales`.`orders` ADD PARTITION FIELD bucket(16, `id`)",
        "ALTER TABLE `lake`.`sales`.`orders` ADD PARTITION FIELD `name`",
        "ALTER TABLE `lake`.`sales`.`orders` WRITE ORDERED BY `id` DESC",
    )


def test_partitions_not_on_the_first_column_go_into_create():
    spec = make_spec(partitioning=["hours(ts)", "truncate(4, name)"])
    plan = build_plan(spec, "c.n.t", TableState(namespace_exists=True, exists=False), BATCH)
    assert "PARTITIONED BY (hours(`ts`), truncate(4, `name`))" in plan.statements()[0]
    assert not plan.add_partition_fields


@pytest.mark.parametrize(
    ("partitioning", "complaint"),
    [
        (["days(name)"], "days() on a date or timestamp or timestamp_ntz column (name is string)"),
        (["bucket(4, nope)"], "a column of the table"),
        (["hours(id)"], "hours() on a timestamp"),
    ],
)
def test_a_partition_spec_that_does_not_fit_the_columns_is_an_error(partitioning, complaint):
    spec = make_spec(partitioning=partitioning)
    with pytest.raises(ConfigError) as err:
        build_plan(spec, "c.n.t", TableState(namespace_exists=True, exists=False), BATCH)
    (problem,) = err.value.problems
    assert problem.code == "BAD_PARTITION" and problem.key_path == "partitioning[0]"
    assert complaint in problem.expected


def test_an_unparsable_partition_spec_that_bypassed_validation_is_still_an_error():
    spec = make_spec().model_copy(update={"partitioning": ["bucket(id)"]})
    with pytest.raises(ConfigError, match="bucket"):
        build_plan(spec, "c.n.t", TableState(namespace_exists=True, exists=False), BATCH)


def test_names_with_hyphens_are_refused_even_when_the_spec_was_not_validated():
    spec = make_spec().model_copy(update={"namespace": "sales-eu", "name": "orders-v2"})
    with pytest.raises(ConfigError) as err:
        check_identifiers(spec, "my-lake")
    assert [p.key_path for p in err.value.problems] == ["catalog", "namespace", "name"]
    assert all(p.code == "INVALID_IDENTIFIER" and "'-'" in p.expected for p in err.value.problems)


def test_evolving_an_existing_table():
    table = struct(("id", LongType()), ("qty", IntegerType(), False), ("info", struct(("city", StringType()))))
    batch = struct(
        ("id", LongType()),
        ("qty", LongType()),
        ("info", struct(("city", StringType()), ("zip", StringType()))),
        ("note", StringType()),
    )
    spec = make_spec(namespace="n", name="t", schema_evolution="full", partitioning=["bucket(8, id)"])
    state = existing(
        table,
        properties={
            "write.merge.mode": "merge-on-read",
            "write.parquet.compression-codec": "zstd",
            "write.target-file-size-bytes": "1",
        },
    )
    plan = build_plan(spec, "c.n.t", state, batch)
    assert plan.statements() == (
        "ALTER TABLE `c`.`n`.`t` ADD COLUMNS (`info`.`zip` STRING, `note` STRING)",
        "ALTER TABLE `c`.`n`.`t` ALTER COLUMN `qty` TYPE BIGINT",
        "ALTER TABLE `c`.`n`.`t` ALTER COLUMN `qty` DROP NOT NULL",
        "ALTER TABLE `c`.`n`.`t` ADD PARTITION FIELD bucket(8, `id`)",
        "ALTER TABLE `c`.`n`.`t` SET TBLPROPERTIES ('write.target-file-size-bytes'='134217728')",
    )
    text = plan.describe()
    assert "+ add column info.zip STRING (optional)" in text
    assert "~ widen qty: INT -> BIGINT" in text and "~ make qty optional" in text


def test_strict_refuses_with_the_field_names_and_plans_nothing():
    spec = make_spec(schema_evolution="strict")
    with pytest.raises(SchemaMismatchError) as err:
        build_plan(spec, "c.n.t", existing(), struct(("id", LongType()), ("info", struct(("zip", StringType())))))
    assert err.value.fields == ("info.zip",)
    assert "info.zip" in str(err.value) and "schema_evolution: strict" in str(err.value)


def test_an_up_to_date_table_plans_no_changes():
    spec = make_spec(partitioning=["bucket(4, id)"], write={"sort_order": ["id"]})
    state = existing(
        partition_fields=(("bucket[4]", "id"),),
        sort_fields=(("id", "ASC"),),
        properties={
            "write.merge.mode": "merge-on-read",
            "write.parquet.compression-codec": "zstd",
            "write.target-file-size-bytes": "134217728",
        },
    )
    plan = build_plan(spec, "c.n.t", state, struct(("id", LongType())))
    assert not plan.changes
    assert plan.describe() == "table c.n.t\n  = no changes"


def test_overwrite_on_an_unpartitioned_table_is_called_out():
    plan = build_plan(make_spec(commit_mode="overwrite"), "c.n.t", existing(), struct(("id", LongType())))
    assert any("replaces the whole table" in n for n in plan.notes)


def test_upsert_keys_must_be_columns_of_the_batch():
    spec = make_spec(commit_mode="upsert", key_fields=["id", "region"])
    with pytest.raises(ConfigError) as err:
        build_plan(spec, "c.n.t", TableState(namespace_exists=True, exists=False), struct(("id", LongType())))
    assert [p.key_path for p in err.value.problems] == ["key_fields[1]", "sequence_field"]


def test_describe_of_a_new_table():
    spec = make_spec(namespace="sales", name="orders", partitioning=["days(ts)"], write={"sort_order": ["ts"]})
    plan = build_plan(spec, "lake.sales.orders", TableState(namespace_exists=False, exists=False), BATCH)
    assert plan.describe() == "\n".join(
        [
            "table lake.sales.orders",
            "  + create namespace lake.sales",
            "  + create table",
            "      id BIGINT",
            "      name STRING",
            "      ts TIMESTAMP",
            "  + partitioned by days(`ts`)",
            "  + write ordered by `ts` ASC",
            "  + property format-version=2",
            "  + property write.parquet.compression-codec=zstd",
            "  + property write.target-file-size-bytes=134217728",
        ]
    )


def test_only_upsert_tables_are_merge_on_read():
    from kafka_iceberg.write.properties import MERGE_MODE, table_properties

    assert table_properties(make_spec(commit_mode="upsert", key_fields=["id"]))[MERGE_MODE] == "merge-on-read"
    assert MERGE_MODE not in table_properties(make_spec())
    overridden = make_spec(commit_mode="upsert", key_fields=["id"], write={"properties": {MERGE_MODE: "copy-on-write"}})
    assert table_properties(overridden)[MERGE_MODE] == "copy-on-write"
