"""Session-wide fixtures: one Spark session (built by the product's own factory), one local
stack owned by the test session, and a guard keeping the developer's configuration out."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafka_iceberg.catalogs import HadoopCatalog, render
from kafka_iceberg.environment import local_resolver
from kafka_iceberg.local import processes
from kafka_iceberg.local.profile import LOCAL_CATALOG, local_catalog_profile
from kafka_iceberg.local.readback import pyiceberg_catalog
from kafka_iceberg.local.stack import LocalStack, StackState
from kafka_iceberg.refs import Resolver
from kafka_iceberg.session import JVM_OPTIONS_ENV, attach_catalogs, get_spark

REPO = Path(__file__).resolve().parents[1]
_TIMINGS: dict[str, float] = {}
# The tests' Spark jobs are short: the JVM's quick compiler alone starts them sooner (docs/local-stack.md,
# "Quick JIT for tests"). Every local session of the run gets it, subprocesses' included; the
# deployed-jobs harness's tasks, which get only a cluster's environment, do not. C1 alone reserves 48 MB
# for compiled code (tiered: 240 MB); a worker's session compiling a thousand tests' generated classes
# filled it, and Spark ends the JVM on "Out of space in CodeCache": the tiered size is kept.
os.environ.setdefault(JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m")


def pytest_sessionstart(session: pytest.Session) -> None:
    _TIMINGS["suite_start"] = time.monotonic()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    total = time.monotonic() - _TIMINGS.get("suite_start", time.monotonic())
    lines = []
    if "stack_startup" in _TIMINGS:
        lines.append(f"local stack start-up: {_TIMINGS['stack_startup']:.2f}s")
    if "spark_startup" in _TIMINGS:
        lines.append(f"spark session start-up: {_TIMINGS['spark_startup']:.2f}s")
    lines.append(f"suite total: {total:.1f}s")
    terminalreporter.write_sep("=", "timings")
    for line in lines:
        terminalreporter.write_line(line)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with a ``slow`` test first, each module's tests in their order.

    ``make test`` hands whole files to its workers in this order (pytest-xdist ``--dist loadfile``):
    the few long files start first and the many short ones fill in around them, instead of one
    long file starting last while the other worker has nothing left to run.
    """
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable


@pytest.fixture(autouse=True)
def _isolate_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make test runs ignore the developer's Databricks credentials and secret overrides."""
    for key in list(os.environ):
        if key.startswith(("KAFKA_ICEBERG_SECRET__", "DATABRICKS_")) or key == "KAFKA_ICEBERG_MAVEN_REPO":
            monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackState]:
    """The local stack for the whole session; its servers die with the session even on a crash."""
    run = tmp_path_factory.mktemp("stack")
    local = LocalStack(run)
    started = time.monotonic()
    state = local.up(owned=True)
    _TIMINGS["stack_startup"] = time.monotonic() - started
    previous = os.environ.get("KAFKA_ICEBERG_RUN_DIR")
    os.environ["KAFKA_ICEBERG_RUN_DIR"] = str(run)  # ${local:...} and subprocesses find this stack
    yield state
    local.down()
    if previous is None:
        os.environ.pop("KAFKA_ICEBERG_RUN_DIR", None)
    else:
        os.environ["KAFKA_ICEBERG_RUN_DIR"] = previous
    leftovers = [s.name for s in state.services.values() if processes.is_ours(s.pid, s.executable, s.marker)]
    assert not leftovers, f"servers still running after the session: {leftovers}"


@pytest.fixture(scope="session")
def stack_status(stack: StackState) -> dict[str, Any]:
    return stack.describe()


@pytest.fixture(scope="session")
def spark() -> Any:
    started = time.monotonic()
    session = get_spark(app_name="kafka-iceberg-tests")
    _TIMINGS["spark_startup"] = time.monotonic() - started
    return session


@dataclass
class Lake:
    """The local REST catalog on S3, seen from Spark (writer) and pyiceberg (independent reader)."""

    spark: Any
    catalog: str
    status: dict[str, Any]
    resolver: Resolver

    def pyiceberg(self) -> Any:
        return pyiceberg_catalog(self.status)

    def new_namespace(self, prefix: str = "t") -> str:
        ns = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.catalog}.{ns}")
        return ns


@pytest.fixture(scope="session")
def lake(spark: Any, stack: StackState) -> Lake:
    resolver = local_resolver(stack_dir=Path(stack.run_dir))
    attach_catalogs(spark, [render(LOCAL_CATALOG, local_catalog_profile())], resolver)
    return Lake(spark, LOCAL_CATALOG, stack.describe(), resolver)


@pytest.fixture(scope="session")
def files_catalog(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Hadoop catalog on local disk: the fast catalog for tests that need no catalog server."""
    warehouse = tmp_path_factory.mktemp("warehouse")
    profile = HadoopCatalog(type="hadoop", warehouse=f"file://{warehouse}")
    attach_catalogs(spark, [render("files", profile)], Resolver(env={}))
    return "files"
