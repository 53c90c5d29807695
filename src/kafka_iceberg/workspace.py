"""Operations on a deployed bundle target through the Databricks REST API (databricks-sdk).

``smoke`` runs every ingest job of a target once with ``--available-now`` and checks that each
wrote something; ``status`` reports each job's latest run and, per table, the last commit and lag.
Counts, commit times and lag come from the summary line each ingest run prints last
(:mod:`kafka_iceberg.observe.summary`), read back through ``jobs/runs/get-output``: the REST API
is all the promotion workflow can reach (no Spark, no catalog credentials on the runner).

Which workspace jobs belong to a target is decided by :func:`belongs_to_target`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_iceberg.config import read_yaml
from kafka_iceberg.errors import ConfigError, KafkaIcebergError
from kafka_iceberg.observe.summary import parse_summary

BUNDLE_FILE = "databricks.yml"
INGEST_PREFIX = "ingest_"
SMOKE_FLAG = "--available-now"
TERMINAL_STATES = {"TERMINATED", "SKIPPED", "INTERNAL_ERROR"}
_DEV_PREFIX = re.compile(r"^\[dev [^\]]+\] ")


class WorkspaceError(KafkaIcebergError):
    """The workspace lacks a job of the target, or answered in a way the command cannot use."""


@dataclass(frozen=True)
class Target:
    """A bundle target as ``databricks.yml`` declares it, with its ingest jobs (key -> deployed name)."""

    bundle: str
    name: str
    mode: str
    host: str | None
    root_path: str | None
    jobs: dict[str, str]


def _substitute(text: str, bundle: str, target: str) -> str:
    return text.replace("${bundle.name}", bundle).replace("${bundle.target}", target)


def load_target(root: Path, target: str) -> Target:
    """Read ``databricks.yml`` and ``resources/*.yml`` for ``target`` and its ``ingest_*`` jobs.

    Raises:
        ConfigError: no bundle file, an unknown target, or no ingest job declared.
    """
    path = root / BUNDLE_FILE
    if not path.is_file():
        raise ConfigError.one(str(path), "", None, "the bundle file (run from the project root)", "UNREADABLE_FILE")
    main = read_yaml(path) or {}
    bundle = str((main.get("bundle") or {}).get("name", ""))
    targets = main.get("targets") or {}
    if target not in targets:
        raise ConfigError.one(str(path), "targets", target, "one of " + ", ".join(sorted(targets)), "UNKNOWN_TARGET")
    conf = targets[target] or {}
    workspace = conf.get("workspace") or {}
    root_path = workspace.get("root_path")
    jobs: dict[str, str] = {}
    for resource in [path, *sorted((root / "resources").glob("*.yml"))]:
        doc = (read_yaml(resource) if resource != path else main) or {}
        for key, job in ((doc.get("resources") or {}).get("jobs") or {}).items():
            if key.startswith(INGEST_PREFIX):
                jobs[key] = _substitute(str((job or {}).get("name") or key), bundle, target)
    if not jobs:
        raise ConfigError.one(str(root / "resources"), "resources.jobs", [], "at least one ingest_* job", "NO_JOBS")
    return Target(
        bundle=bundle,
        name=target,
        mode=str(conf.get("mode") or ""),
        host=workspace.get("host"),
        root_path=_substitute(str(root_path), bundle, target) if root_path else None,
        jobs=dict(sorted(jobs.items())),
    )


def belongs_to_target(target: Target, expected_name: str, name: str, metadata_file_path: str | None) -> bool:
    """Whether a workspace job named ``name`` is the target's deployment of ``expected_name``.

    The rule: the name is the bundle's job name (with the ``[dev <user>] `` prefix that
    ``mode: development`` always adds)
    and the job is managed by a bundle deployed under the target's root path: ``root_path`` when
    ``databricks.yml`` sets it, else the default ``.../.bundle/<bundle>/<target>``. So a hand-made
    job with the same name, or another target's copy in a shared workspace, is never triggered.
    """
    if target.mode == "development":
        prefix = _DEV_PREFIX.match(name)
        bare = name[prefix.end() :] if prefix else ""
    else:
        bare = name
    if bare != expected_name or not metadata_file_path:
        return False
    if target.root_path:
        return metadata_file_path.startswith(target.root_path.rstrip("/") + "/")
    return f"/.bundle/{target.bundle}/{target.name}/" in metadata_file_path


def workspace_client(target: Target, profile: str | None = None) -> Any:
    """A ``WorkspaceClient`` with credentials from the environment or ``profile``, as Databricks tools do.

    Without ``DATABRICKS_HOST`` or a profile, the host is the target's ``workspace.host``.
    """
    from databricks.sdk import WorkspaceClient

    host = None if profile or os.environ.get("DATABRICKS_HOST") else target.host
    try:
        return WorkspaceClient(profile=profile, host=host)
    except ValueError as exc:  # no usable credentials: the SDK masks secrets in its message
        raise ConfigError.one(
            "environment", "DATABRICKS_HOST/DATABRICKS_TOKEN", None, "Databricks credentials", "NO_CREDENTIALS",
            hint=str(exc).splitlines()[0][:300],
        ) from None  # fmt: skip


@dataclass
class FoundJob:
    """A target's job as the workspace knows it."""

    key: str
    job_id: int
    name: str
    parameters: list[str]


def find_jobs(client: Any, target: Target) -> tuple[list[FoundJob], list[str]]:
    """The target's ingest jobs in the workspace (``jobs/list``) and the keys of those not found."""
    by_key: dict[str, FoundJob] = {}
    for job in client.jobs.list(expand_tasks=True, limit=100):
        settings = job.settings
        if settings is None or settings.name is None:
            continue
        deployment = settings.deployment
        kind = getattr(getattr(deployment, "kind", None), "value", None)
        metadata = deployment.metadata_file_path if deployment is not None and kind == "BUNDLE" else None
        for key, expected in target.jobs.items():
            if belongs_to_target(target, expected, settings.name, metadata):
                if key in by_key:
                    raise WorkspaceError(f"two jobs match {expected}: {by_key[key].job_id} and {job.job_id}")
                by_key[key] = FoundJob(key, int(job.job_id), settings.name, _wheel_parameters(settings))
    missing = [key for key in target.jobs if key not in by_key]
    return [by_key[k] for k in target.jobs if k in by_key], missing


def _wheel_parameters(settings: Any) -> list[str]:
    for task in settings.tasks or []:
        if task.python_wheel_task is not None:
            return list(task.python_wheel_task.parameters or [])
    return []


@dataclass
class RunResult:
    """What one job's run did; ``problem`` says why it does not count as a good run."""

    job: str
    job_id: int
    run_id: int | None = None
    state: str = "NOT_STARTED"
    duration_s: float | None = None
    records_written: int | None = None
    records_failed: int | None = None
    url: str | None = None
    start_time: int | None = None  # epoch milliseconds
    problem: str | None = None
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Succeeded and wrote at least one record."""
        return self.problem is None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "job": self.job, "job_id": self.job_id, "run_id": self.run_id, "state": self.state,
            "duration_s": self.duration_s, "records_written": self.records_written,
            "records_failed": self.records_failed, "url": self.url, "ok": self.ok, "problem": self.problem,
        }  # fmt: skip


def _state(run: Any) -> tuple[str, str | None, str]:
    """(life cycle state, result state, state message) of a run."""
    state = run.state
    life = getattr(getattr(state, "life_cycle_state", None), "value", None) or "PENDING"
    result = getattr(getattr(state, "result_state", None), "value", None)
    return life, result, (getattr(state, "state_message", None) or "")


def _run_url(client: Any, run: Any, job_id: int) -> str:
    return str(run.run_page_url or f"{client.config.host.rstrip('/')}/jobs/{job_id}/runs/{run.run_id}")


def _read_outputs(client: Any, run: Any, result: RunResult) -> str | None:
    """Fill counts and tables from the tasks' summary lines; returns the first task error, if any."""
    written = failed = 0
    found = False
    error = None
    for task in run.tasks or []:
        if task.run_id is None:
            continue
        output = client.jobs.get_run_output(task.run_id)
        error = error or output.error
        summary = parse_summary(output.logs)
        if summary is None:
            continue
        found = True
        written += int(summary.get("records_written") or 0)
        failed += int(summary.get("records_failed") or 0)
        result.tables.update(summary.get("tables") or {})
    if found:
        result.records_written, result.records_failed = written, failed
    return str(error).splitlines()[0][:300] if error else None


def _finish(client: Any, run: Any, result: RunResult, *, require_records: bool = True) -> None:
    """Judge a finished run: state, duration, counts, problem (an empty run is one for a smoke run)."""
    life, outcome, message = _state(run)
    result.state = outcome or life
    result.url = _run_url(client, run, result.job_id)
    result.start_time = run.start_time
    if run.run_duration:
        result.duration_s = run.run_duration / 1000
    elif run.start_time and run.end_time:
        result.duration_s = (run.end_time - run.start_time) / 1000
    error = _read_outputs(client, run, result)
    if outcome != "SUCCESS":
        result.problem = f"run ended {result.state}" + (f": {error or message}" if error or message else "")
    elif not require_records:
        return
    elif result.records_written is None:
        result.problem = "no kafka-iceberg summary line in the task output"
    elif result.records_written == 0:
        result.problem = "wrote nothing"


def smoke(
    client: Any,
    jobs: list[FoundJob],
    *,
    timeout_s: float,
    poll_s: float = 15.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[RunResult]:
    """Trigger each job once with ``--available-now`` (``jobs/run-now``), wait, judge each run.

    The task's own parameters are sent back with the flag appended, since ``python_params``
    replaces the parameter list. Runs still going at ``timeout_s`` are cancelled and reported as
    ``TIMEOUT``.
    """
    results: dict[int, RunResult] = {}
    for job in jobs:
        params = job.parameters if SMOKE_FLAG in job.parameters else [*job.parameters, SMOKE_FLAG]
        waiter = client.jobs.run_now(job.job_id, python_params=params)
        results[int(waiter.run_id)] = RunResult(job.name, job.job_id, run_id=int(waiter.run_id), state="PENDING")
    deadline = clock() + timeout_s
    pending = set(results)
    while pending:
        for run_id in sorted(pending):
            run = client.jobs.get_run(run_id)
            life, _, _ = _state(run)
            results[run_id].state = life
            results[run_id].url = _run_url(client, run, results[run_id].job_id)
            results[run_id].start_time = run.start_time
            if life in TERMINAL_STATES:
                _finish(client, run, results[run_id])
                pending.discard(run_id)
        if not pending:
            break
        if clock() >= deadline:
            for run_id in sorted(pending):
                client.jobs.cancel_run(run_id)
                result = results[run_id]
                result.problem = f"still {result.state.lower()} after {timeout_s:g}s; cancelled"
                result.state = "TIMEOUT"
                if result.start_time:
                    result.duration_s = max(0.0, time.time() - result.start_time / 1000)
            break
        sleep(poll_s)
    return list(results.values())


@dataclass
class JobStatus:
    """A job's latest run and what its recent runs say about each table."""

    latest: RunResult
    tables: dict[str, dict[str, Any]]


def status(client: Any, jobs: list[FoundJob], *, lookback: int = 10) -> list[JobStatus]:
    """Per job: the latest run (``jobs/runs/list``) and, per table, the last commit and lag.

    Completed runs are read newest first (``jobs/runs/get`` and ``runs/get-output``) until every
    table named in a summary has a commit time or ``lookback`` runs were read: a run that found
    nothing new commits nothing, so the last commit may be several runs back.
    """
    out = []
    for job in jobs:
        runs = list(client.jobs.list_runs(job_id=job.job_id, limit=lookback))
        latest = RunResult(job.name, job.job_id, state="NO_RUNS", problem="never ran")
        tables: dict[str, dict[str, Any]] = {}
        for index, brief in enumerate(runs[:lookback]):
            life, _, _ = _state(brief)
            if index == 0 and life not in TERMINAL_STATES:
                latest = RunResult(job.name, job.job_id, run_id=brief.run_id, state=life)
                latest.url, latest.start_time = _run_url(client, brief, job.job_id), brief.start_time
                continue
            if life not in TERMINAL_STATES:
                continue
            result = RunResult(job.name, job.job_id, run_id=brief.run_id)
            _finish(client, client.jobs.get_run(brief.run_id), result, require_records=False)
            if index == 0:
                latest = result
            for name, facts in result.tables.items():
                known = tables.setdefault(name, {"last_commit": None, "snapshot_id": None, "lag": None})
                if known["last_commit"] is None and facts.get("last_commit"):
                    known["last_commit"], known["snapshot_id"] = facts["last_commit"], facts.get("snapshot_id")
                if known["lag"] is None and facts.get("lag") is not None:
                    known["lag"] = facts["lag"]
            if tables and all(t["last_commit"] for t in tables.values()):
                break
        out.append(JobStatus(latest, tables))
    return out
