"""Every misconfiguration ``validate`` can see without a JVM: exit code 2, the file, the key path and
what is allowed, and never a stack trace (issue 9, "Config errors").

Each case is a small project in ``tmp_path`` (``pipelines/p.yml``, ``environments/local.yml`` and
whatever else the case needs) run through the real command line (:func:`kafka_iceberg.cli.main.main`).
A few cases also go through a subprocess, the way a user runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafka_iceberg.cli.main import main

REPO = Path(__file__).resolve().parents[2]

ENV_OK = (
    "kafka: {bootstrap_servers: 'b:9092'}\ncheckpoint_root: /tmp/ki-checkpoints\n"
    "catalogs:\n  lake: {type: hadoop, warehouse: /tmp/ki-wh}\n"
)
HEAD = "pipeline: p\ncatalog: lake\ntables:\n  - name: orders\n    namespace: sales\n"
JSON_SRC = "    source: {topics: [orders], format: json}\n"
FLATTEN_SRC = "    source: {topics: [orders], format: flatten}\n"
FLATTEN_SCHEMA = FLATTEN_SRC + "    schema: {json_schema: s.json}\n"


@dataclass(frozen=True)
class Case:
    """One broken project and what the message must say."""

    id: str
    pipeline: str | bytes | None  # None: no pipeline file at all
    must_say: tuple[str, ...]  # substrings of stderr: the key path, the allowed values, the reason
    file: str = "pipelines/p.yml"  # the file the message must name (relative to the project)
    env: str | bytes = ENV_OK
    extra: dict[str, str | bytes] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    environ: dict[str, str] = field(default_factory=dict)


CASES = [
    # pipeline files: YAML itself
    Case("yaml_syntax", HEAD + JSON_SRC + "    commit_mode: [append\n", ("line 8", "valid YAML")),
    Case("yaml_tab", HEAD + "\tsource: x\n", ("line 6", "valid YAML", "'\\t'")),
    Case("yaml_duplicate_key", HEAD + JSON_SRC + "    commit_mode: append\n    commit_mode: upsert\n",
         ("line 8", "duplicate key 'commit_mode'", "each key once per mapping")),
    Case("not_utf8", b"pipeline: p\xff\xfe\ntables: []\n", ("a UTF-8 text file",)),
    Case("empty_file", "", ("a mapping with keys pipeline and tables",)),
    Case("top_level_list", "- a\n- b\n", ("a mapping with keys pipeline and tables",)),
    Case("tables_not_a_list", "pipeline: p\ntables: {a: 1}\n", ("tables: got", "a list of table specs")),
    Case("no_tables", "pipeline: p\n", ("tables: got nothing", "a non-empty list of table specs")),
    Case("missing_pipeline_file", None, ("--pipeline", "an existing pipeline file or directory"),
         file="pipelines/nope.yml", args=("--pipeline", "{root}/pipelines/nope.yml")),
    # keys and types
    Case("unknown_key", HEAD + JSON_SRC + "    comit_mode: upsert\n", ("tables[0].comit_mode", "commit_mode, errors")),
    Case("unknown_source_key", HEAD + "    source: {topics: [orders], format: json, topicz: [x]}\n",
         ("tables[0].source.topicz", "topics")),
    Case("wrong_type_int", HEAD + "    source: {topics: [orders], format: json, max_records_per_batch: lots}\n",
         ("tables[0].source.max_records_per_batch", "an integer")),
    Case("wrong_type_bool", HEAD + "    source: {topics: [orders], format: json, include_headers: maybe}\n",
         ("tables[0].source.include_headers", "true or false")),
    Case("out_of_range", HEAD + "    source: {topics: [orders], format: json, max_records_per_batch: -5}\n",
         ("tables[0].source.max_records_per_batch", "greater than 0")),
    Case("no_topics", HEAD + "    source: {format: json}\n", ("tables[0].source", "topics", "topic_pattern")),
    Case("bad_topic_regex", HEAD + "    source: {topic_pattern: '(', format: json}\n",
         ("tables[0].source.topic_pattern", "a valid regular expression")),
    # enums
    Case("bad_format", HEAD + "    source: {topics: [orders], format: parquet}\n",
         ("tables[0].source.format", "'binary', 'avro', 'protobuf' or 'json_schema'")),
    Case("bad_mode", HEAD + "    source: {topics: [orders], format: json, mode: both}\n",
         ("tables[0].source.mode", "'key', 'value' or 'default'")),
    Case("mode_default_for_json", HEAD + "    source: {topics: [orders], format: json, mode: default}\n",
         ("tables[0].source.mode", "key or value")),
    Case("bad_commit_mode", HEAD + JSON_SRC + "    commit_mode: merge\n",
         ("tables[0].commit_mode", "'append', 'overwrite' or 'upsert'")),
    Case("bad_schema_evolution", HEAD + JSON_SRC + "    schema_evolution: loose\n",
         ("tables[0].schema_evolution", "'strict', 'add_columns' or 'full'")),
    Case("bad_partition_window", HEAD + JSON_SRC + "    partition_window: week\n",
         ("tables[0].partition_window", "'day', 'hour', 'minute' or 'none'")),
    Case("bad_partition_transform", HEAD + FLATTEN_SRC + "    schema: {columns: {id: long}}\n"
         "    partitioning: [weeks(id)]\n", ("tables[0].partitioning", "bucket(N, col)", "hours(col)")),
    Case("bad_bucket", HEAD + FLATTEN_SRC + "    schema: {columns: {id: long}}\n"
         "    partitioning: [bucket(sixteen, id)]\n", ("tables[0].partitioning", "N a positive integer")),
    Case("partition_unknown_column", HEAD + FLATTEN_SRC + "    schema: {columns: {id: long}}\n"
         "    partitioning: [days(nope)]\n", ("tables[0].partitioning[0]",)),
    Case("bad_trigger", HEAD + JSON_SRC + "    trigger: sometimes\n", ("tables[0].trigger", "a mapping")),
    Case("bad_trigger_interval", HEAD + JSON_SRC + "    trigger: {processing_time: often}\n",
         ("tables[0].trigger.processing_time", "'1 minute'")),
    Case("bad_starting_offsets", HEAD + "    source: {topics: [orders], format: json, starting_offsets: middle}\n",
         ("tables[0].source.starting_offsets", "'earliest' or 'latest'")),
    Case("bad_compression", HEAD + JSON_SRC + "    write: {compression: lzo}\n",
         ("tables[0].write.compression", "'zstd'")),
    Case("bad_on_violation", HEAD + JSON_SRC + "    expectations: {e1: {expr: 'true', on_violation: explode}}\n",
         ("tables[0].expectations.e1.on_violation", "'warn', 'drop', 'quarantine' or 'fail'")),
    Case("arrow_decoder", HEAD + "    source: {topics: [orders], format: flatten, decoder: arrow}\n",
         ("tables[0].source.decoder", "schema_evolution strict")),
    # combinations
    Case("upsert_without_key_fields", HEAD + JSON_SRC + "    commit_mode: upsert\n",
         ("tables[0].key_fields", "commit_mode is upsert")),
    Case("key_field_not_a_column", HEAD + JSON_SRC + "    commit_mode: upsert\n    key_fields: [nope]\n",
         ("tables[0].key_fields[0]", "one of the table's columns")),
    Case("csv_without_schema", HEAD + "    source: {topics: [orders], format: csv}\n",
         ("tables[0].schema", "schema.columns (or json_schema)")),
    Case("csv_two_char_delimiter", HEAD + "    source: {topics: [orders], format: csv, csv: {delimiter: ';;'}}\n"
         "    schema: {columns: {id: long}}\n", ("tables[0].source.csv.delimiter", "a single character")),
    Case("schema_for_json", HEAD + JSON_SRC + "    schema: {columns: {id: long}}\n",
         ("tables[0].schema", "no schema for format json")),
    Case("strict_flatten_without_schema", HEAD + FLATTEN_SRC + "    schema_evolution: strict\n",
         ("tables[0].schema_evolution", "add_columns or full, or a declared schema")),
    Case("bad_column_type", HEAD + FLATTEN_SRC + "    schema: {columns: {id: lng}}\n",
         ("tables[0].schema.columns", "string, long", "not 'lng'")),
    Case("reserved_column", HEAD + FLATTEN_SRC + "    schema: {columns: {offset: long}}\n",
         ("tables[0].schema.columns.offset", "a column name other than")),
    Case("error_topic_loops", HEAD + JSON_SRC + "    errors: {error_topic: orders}\n",
         ("tables[0].errors.error_topic", "a topic the table does not read")),
    Case("quarantine_into_itself", HEAD + JSON_SRC + "    errors: {quarantine_table: sales.orders}\n",
         ("tables[0].errors.quarantine_table", "a table other than the target itself")),
    Case("duplicate_table", HEAD + JSON_SRC + "  - name: orders\n    namespace: sales\n" + JSON_SRC,
         ("tables[1].name", "a table not already declared")),
    # names
    Case("hyphenated_table_name", HEAD.replace("name: orders", "name: order-events") + JSON_SRC,
         ("tables[0].name", "letters, digits and '_' only", "reject '-'")),
    Case("hyphenated_namespace", HEAD.replace("namespace: sales", "namespace: sales-eu") + JSON_SRC,
         ("tables[0].namespace", "letters, digits and '_' only")),
    # catalogs and environments
    Case("unknown_catalog", HEAD.replace("catalog: lake", "catalog: warehouse_of_dreams") + JSON_SRC,
         ("catalog: got 'warehouse_of_dreams'", "a catalog profile of", "lake")),
    Case("unknown_catalog_override", HEAD + JSON_SRC, ("--catalog", "lake"), args=("--catalog", "zzz")),
    Case("missing_env_file", HEAD + JSON_SRC, ("--env: got 'qa'", "one of local"), file="pipelines",
         args=("--env", "qa")),
    Case("env_yaml_syntax", HEAD + JSON_SRC, ("valid YAML",), file="environments/local.yml", env="kafka: [\n"),
    Case("env_duplicate_key", HEAD + JSON_SRC, ("duplicate key 'checkpoint_root'",), file="environments/local.yml",
         env="checkpoint_root: /c\n" + ENV_OK),
    Case("env_not_a_mapping", HEAD + JSON_SRC, ("a mapping with kafka, checkpoint_root and catalogs",),
         file="environments/local.yml", env="- 1\n"),
    Case("env_missing_key", HEAD + JSON_SRC, ("checkpoint_root: got nothing", "this key is required"),
         file="environments/local.yml", env="kafka: {bootstrap_servers: b}\ncatalogs: {lake: {type: hadoop, warehouse: /w}}\n"),
    Case("env_unknown_catalog_key", HEAD + JSON_SRC, ("catalogs.lake", "wharehouse"), file="environments/local.yml",
         env=ENV_OK.replace("warehouse: /tmp/ki-wh", "warehouse: /w, wharehouse: x")),
    Case("env_bad_catalog_type", HEAD + JSON_SRC, ("catalogs.lake.type", "'rest'", "'hadoop'"),
         file="environments/local.yml", env=ENV_OK.replace("type: hadoop", "type: oracle")),
    Case("env_bad_reference_kind", HEAD + JSON_SRC, ("kafka.bootstrap_servers", "env, secret or local"),
         file="environments/local.yml", env=ENV_OK.replace("'b:9092'", "'${vault:x}'")),
    Case("env_bad_secret_reference", HEAD + JSON_SRC, ("kafka.sasl_password", "${secret:scope/key}"),
         file="environments/local.yml",
         env=ENV_OK.replace("'b:9092'}", "'b:9092', sasl_password: '${secret:no_slash}'}")),
    Case("unset_env_var", HEAD + JSON_SRC, ("kafka.bootstrap_servers", "environment variable KI_CE_UNSET to be set"),
         file="environments/local.yml", env=ENV_OK.replace("'b:9092'", "'${env:KI_CE_UNSET}'")),
    Case("unset_env_var_for_a_secret", HEAD + JSON_SRC,
         ("catalogs.lake.auth.client_secret", "environment variable KI_CE_CLIENT_SECRET to be set"),
         file="environments/local.yml",
         env="kafka: {bootstrap_servers: 'b:9092'}\ncheckpoint_root: /tmp/c\ncatalogs:\n"
         "  lake: {type: rest, uri: 'http://c', warehouse: w, auth: {type: oauth2, "
         "client_id: app, client_secret: '${env:KI_CE_CLIENT_SECRET}'}}\n"),
    # JSON Schema files
    Case("json_schema_missing", HEAD + FLATTEN_SCHEMA, ("tables[0].schema.json_schema", "No such file")),
    Case("json_schema_not_json", HEAD + FLATTEN_SCHEMA, ("tables[0].schema.json_schema", "a readable JSON Schema"),
         extra={"pipelines/s.json": "{not json"}),
    Case("json_schema_an_array", HEAD + FLATTEN_SCHEMA, ("tables[0].schema.json_schema", "type object with properties"),
         extra={"pipelines/s.json": "[1, 2]"}),
    Case("json_schema_not_object", HEAD + FLATTEN_SCHEMA, ("tables[0].schema.json_schema", "type object"),
         extra={"pipelines/s.json": '{"type": "array", "items": {}}'}),
    Case("json_schema_bad_required", HEAD + FLATTEN_SCHEMA, ("required: a list of property names",),
         extra={"pipelines/s.json": '{"type": "object", "properties": {"a": {}}, "required": 5}'}),
    Case("json_schema_bad_property", HEAD + FLATTEN_SCHEMA, ("properties.a: a JSON Schema object",),
         extra={"pipelines/s.json": '{"type": "object", "properties": {"a": 3}}'}),
    Case("json_schema_is_a_directory", HEAD + FLATTEN_SRC + "    schema: {json_schema: sub}\n",
         ("tables[0].schema.json_schema",), extra={"pipelines/sub/x": "1"}),
    # transforms and definitions
    Case("transform_not_module_function", HEAD + JSON_SRC + "    transform: clean\n",
         ("tables[0].transform", "module:function")),
    Case("transform_module_missing", HEAD + JSON_SRC + "    transform: no_such_module_ki:clean\n",
         ("tables[0].transform", "an importable module")),
    Case("definitions_not_a_list", HEAD + JSON_SRC + "definitions: tables.py\n", ("definitions", "a list")),
    Case("definitions_file_missing", HEAD + JSON_SRC + "definitions: [nope.py]\n",
         ("definitions", "an existing Python file")),
    # bundle files
    Case("bundle_yaml_syntax", HEAD + JSON_SRC, ("valid YAML",), file="databricks.yml",
         extra={"databricks.yml": "bundle: [\n"}),
    Case("bundle_not_a_mapping", HEAD + JSON_SRC, ("a mapping of bundle keys",), file="databricks.yml",
         extra={"databricks.yml": "- 1\n"}),
    Case("bundle_resource_not_a_mapping", HEAD + JSON_SRC, ("a mapping of bundle keys",), file="resources/j.yml",
         extra={"databricks.yml": "bundle: {name: x}\n", "resources/j.yml": "- 1\n"}),
    Case("bundle_jobs_not_a_mapping", HEAD + JSON_SRC, ("resources.jobs", "a mapping of job name to job"),
         file="resources/j.yml", extra={"databricks.yml": "bundle: {name: x}\n", "resources/j.yml": "resources: {jobs: [1]}\n"}),
    Case("bundle_invalid_job", HEAD + JSON_SRC, ("resources.jobs.j", "a valid Databricks job"), file="resources/j.yml",
         extra={"databricks.yml": "bundle: {name: x}\n", "resources/j.yml": "resources: {jobs: {j: {tasks: 5}}}\n"}),
    Case("bundle_undeclared_variable", HEAD + JSON_SRC, ("${var.nope}", "a variable declared in databricks.yml"),
         file="resources/j.yml",
         extra={"databricks.yml": "bundle: {name: x}\n", "resources/j.yml": "resources: {jobs: {j: {name: '${var.nope}'}}}\n"}),
]  # fmt: skip


def _project(root: Path, case: Case) -> list[str]:
    (root / "pipelines").mkdir()
    (root / "environments").mkdir()
    files: dict[str, str | bytes] = {"environments/local.yml": case.env, **case.extra}
    if case.pipeline is not None:
        files["pipelines/p.yml"] = case.pipeline
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    args = [a.replace("{root}", str(root)) for a in case.args]
    if "--pipeline" not in args:
        args = ["--pipeline", str(root / "pipelines" / "p.yml"), *args]
    if "--env" not in args:
        args = [*args, "--env", "local"]
    return ["validate", *args]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_misconfiguration_exits_2_naming_file_key_and_allowed(case, tmp_path, monkeypatch, capsys):
    argv = _project(tmp_path, case)
    monkeypatch.chdir(tmp_path)  # run from the project, as a user does: it is found from the current directory first
    for name in ("KI_CE_UNSET", "KI_CE_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    for name, value in case.environ.items():
        monkeypatch.setenv(name, value)
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    assert "Traceback" not in out + err
    assert "configuration problem" in err
    assert str(tmp_path / case.file) in err, err
    for part in case.must_say:
        assert part in err, f"{part!r} not in:\n{err}"


def test_every_case_id_is_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case_id", ["yaml_duplicate_key", "not_utf8", "json_schema_an_array", "bundle_not_a_mapping"])
def test_through_a_subprocess_as_a_user_runs_it(case_id, tmp_path):
    """The cases that crashed with exit 1 before, end to end in a fresh interpreter."""
    case = next(c for c in CASES if c.id == case_id)
    argv = _project(tmp_path, case)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KI_CE_")}
    result = subprocess.run(
        [sys.executable, "-m", "kafka_iceberg.cli.main", *argv], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert str(tmp_path / case.file) in result.stderr
    for part in case.must_say:
        assert part in result.stderr


def test_transform_function_is_checked_at_run_not_by_validate(tmp_path, capsys):
    """Documented limit: validate checks the transform's module exists without importing it (importing
    user code could start Spark); a missing function is a ConfigError (exit 2) when the run resolves it."""
    from kafka_iceberg.errors import ConfigError
    from kafka_iceberg.spec.api import resolve_transform

    with pytest.raises(ConfigError) as info:
        resolve_transform("json:no_such_function")
    assert info.value.problems[0].code == "UNKNOWN_TRANSFORM"
    assert "no_such_function" in str(info.value)
