"""``kafka-iceberg workspace smoke|status``: the deployed target, seen through the REST API."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kafka_iceberg.cli.output import EXIT_FAILED, EXIT_OK, emit, emit_json
from kafka_iceberg.observe.text import table


def add_workspace_parser(sub: Any) -> None:
    """The ``workspace`` command and its ``smoke`` and ``status`` actions."""
    workspace = sub.add_parser("workspace", help="smoke-run or inspect a deployed bundle target (databricks-sdk)")
    actions = workspace.add_subparsers(dest="action", required=True)
    smoke = actions.add_parser("smoke", help="run each ingest job of the target once (available_now) and check it")
    status = actions.add_parser("status", help="latest run per job, last commit and lag per table")
    for parser in (smoke, status):
        parser.add_argument("--target", required=True, help="bundle target of databricks.yml (staging, prod...)")
        parser.add_argument("--profile", help="~/.databrickscfg profile (default: DATABRICKS_* variables)")
        parser.add_argument("--project", default=".", help="directory holding databricks.yml (default: .)")
        parser.add_argument("--json", action="store_true", help="the report as JSON")
    smoke.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the runs (default 3600)")
    smoke.add_argument("--poll", type=float, default=15.0, help="seconds between state checks (default 15)")
    smoke.set_defaults(handler=cmd_smoke)
    status.add_argument("--lookback", type=int, default=10, help="recent runs read per job (default 10)")
    status.set_defaults(handler=cmd_status)


def _connect(args: argparse.Namespace) -> tuple[Any, Any]:
    from kafka_iceberg.workspace import load_target, workspace_client

    target = load_target(Path(args.project), args.target)
    return target, workspace_client(target, args.profile)


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _took(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.0f}s"


def cmd_smoke(args: argparse.Namespace) -> int:
    """Trigger, wait, report; exit 1 when a job is missing, failed, timed out or wrote nothing."""
    from kafka_iceberg.workspace import WorkspaceError, find_jobs, smoke

    target, client = _connect(args)
    jobs, missing = find_jobs(client, target)
    if missing:
        names = ", ".join(target.jobs[k] for k in missing)
        raise WorkspaceError(f"not deployed to target {target.name}: {names} (nothing was triggered)")
    results = smoke(client, jobs, timeout_s=args.timeout, poll_s=args.poll)
    if args.json:
        emit_json({"target": target.name, "ok": all(r.ok for r in results), "jobs": [r.to_json() for r in results]})
    else:
        rows = [
            (r.job, r.state, _took(r.duration_s), _count(r.records_written), _count(r.records_failed), r.url)
            for r in results
        ]
        emit(table(rows, ["job", "state", "took", "written", "failed", "run"]))
        for r in results:
            if r.problem:
                emit(f"FAILED {r.job}: {r.problem}")
        bad = sum(not r.ok for r in results)
        emit(f"smoke {target.name}: " + (f"{bad} of {len(results)} job(s) failed" if bad else "all jobs wrote records"))
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def cmd_status(args: argparse.Namespace) -> int:
    """Report; exit 1 when a job is missing or its latest run failed."""
    from kafka_iceberg.workspace import find_jobs, status

    target, client = _connect(args)
    jobs, missing = find_jobs(client, target)
    statuses = status(client, jobs, lookback=args.lookback)
    failed = [s.latest for s in statuses if s.latest.problem and s.latest.state != "NO_RUNS"]
    if args.json:
        emit_json(
            {
                "target": target.name,
                "missing": [target.jobs[k] for k in missing],
                "jobs": [{**s.latest.to_json(), "tables": s.tables} for s in statuses],
            }
        )
    else:
        rows = [
            (s.latest.job, s.latest.state, _started(s.latest.start_time), _took(s.latest.duration_s), s.latest.url)
            for s in statuses
        ]
        rows += [(target.jobs[k], "NOT DEPLOYED", "", "", "") for k in missing]
        emit(table(rows, ["job", "latest run", "started", "took", "run"]))
        tables = [
            (name, facts["last_commit"] or "unknown", "unknown" if facts["lag"] is None else facts["lag"], s.latest.job)
            for s in statuses
            for name, facts in sorted(s.tables.items())
        ]
        emit("")
        emit(table(tables, ["table", "last commit", "lag", "job"]))
    return EXIT_FAILED if missing or failed else EXIT_OK


def _started(epoch_ms: int | None) -> str:
    import datetime as dt

    if not epoch_ms:
        return ""
    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.timezone.utc).isoformat(timespec="seconds")
