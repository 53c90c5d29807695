"""``kafka-iceberg``: validate, plan, run and maintain pipelines; manage the local stack."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kafka_iceberg.cli import pipelines
from kafka_iceberg.cli.output import EXIT_FAILED, EXIT_OK, emit, emit_json, run_guarded, setup_logging
from kafka_iceberg.cli.pipelines import add_check_arg, add_pipeline_args, add_run_args
from kafka_iceberg.cli.workspace import add_workspace_parser
from kafka_iceberg.observe.text import table
from kafka_iceberg.paths import run_dir


def _cmd_local(args: argparse.Namespace) -> int:
    from kafka_iceberg.local.stack import LocalStack

    stack = LocalStack(Path(args.run_dir) if args.run_dir else run_dir())
    if args.action == "up":
        state = stack.up(owned=False)
        emit(f"local stack up in {state.startup_seconds:.2f}s (run dir {state.run_dir})")
        emit_json(state.describe())
        return EXIT_OK
    if args.action == "down":
        stack.down()
        emit("local stack stopped")
        return EXIT_OK
    status = stack.status()
    if args.json:
        emit(json.dumps(status))
    elif not status.get("running"):
        emit(f"local stack not running (run dir {status['run_dir']})")
    else:
        health = status["health"]  # a split stack has its own s3 and catalog processes
        rows = [
            ("kafka", status["kafka"]["bootstrap"], health["kafka"]),
            ("s3", status["s3"]["endpoint"], health.get("s3", health["seaweedfs"])),
            ("catalog", status["catalog"]["uri"], health.get("catalog", health["seaweedfs"])),
        ]
        emit(table(rows, ["service", "endpoint", "healthy"]))
    return EXIT_OK if status.get("running") else EXIT_FAILED


def _cmd_jars(args: argparse.Namespace) -> int:
    from kafka_iceberg import jars

    if args.action == "fetch":
        for paths in jars.resolve_all().values():
            for path in paths:
                emit(str(path))
        return EXIT_OK
    if args.action == "verify":
        bad = jars.verify()
        emit("all jars match jars.lock.toml" if not bad else "\n".join(["checksum mismatch or missing:", *bad]))
        return EXIT_OK if not bad else EXIT_FAILED
    if args.action == "archive":
        from kafka_iceberg import class_archive

        try:
            emit(str(class_archive.record(force=args.force)))
        except RuntimeError as exc:  # local sessions still run, only slower to start
            emit(f"no class-data archive: {exc}", sys.stderr)
            return EXIT_FAILED
        return EXIT_OK
    if args.action == "lock":
        relocked = jars.relock()
        emit(f"{jars.LOCK_FILE}: {len(relocked)} jars")
        return EXIT_OK
    lock = jars.load_lock()
    rows = [(j.maven, j.classpath, "yes" if j.cluster else "") for j in lock.jars]
    emit(table(rows, ["maven", "classpath", "cluster"]))
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    from kafka_iceberg.errors import ConfigError
    from kafka_iceberg.project import validate_project

    started = time.monotonic()
    report = validate_project(Path(args.pipeline), env_name=args.env, catalog=args.catalog)
    for warning in report.warnings:  # on stderr, so stdout stays the one "valid:" line
        emit(f"warning: {warning}", sys.stderr)
    if report.problems:
        raise ConfigError(report.problems)
    envs = ", ".join(e.name + ("*" if e.name == args.env else "") for e in report.environments)
    emit(
        f"valid: {len(report.pipelines)} pipeline file(s), {report.tables} table(s), "
        f"environments {envs}, {len(report.bundle_files)} bundle file(s) "
        f"({time.monotonic() - started:.2f}s)"
    )
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    from kafka_iceberg.observe.verify import render_json, render_text, verify_pipeline
    from kafka_iceberg.run import prepare

    prepared = prepare(Path(args.pipeline), env_name=args.env, catalog=args.catalog)
    results = verify_pipeline(prepared, table=args.table)
    emit(render_json(results) if args.json else render_text(results))
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _cmd_demo(args: argparse.Namespace) -> int:
    from kafka_iceberg.cli.demo import run_demo

    counts = run_demo(emit, Path(args.pipeline), Path(args.run_dir) if args.run_dir else None)
    return EXIT_OK if counts.get("sales.orders") and not counts.get("verify_failed") else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kafka-iceberg``."""
    parser = argparse.ArgumentParser(prog="kafka-iceberg", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    local = sub.add_parser("local", help="the embedded local stack: Kafka broker, S3, Iceberg REST catalog")
    local.add_argument("action", choices=["up", "down", "status"])
    local.add_argument("--json", action="store_true", help="status as one JSON object")
    local.add_argument(
        "--run-dir", help="state directory (default $KAFKA_ICEBERG_RUN_DIR or ~/.local/state/kafka-iceberg)"
    )
    local.set_defaults(handler=_cmd_local)

    jar = sub.add_parser("jars", help="JVM jars of jars.lock.toml")
    jar.add_argument(
        "action",
        choices=["fetch", "verify", "list", "lock", "archive"],
        help="archive: record the JVM class-data archive local sessions start from (kafka_iceberg.class_archive)",
    )
    jar.add_argument("--force", action="store_true", help="archive: record it again even if it exists")
    jar.set_defaults(handler=_cmd_jars)

    validate = sub.add_parser("validate", help="check pipelines, environments and bundle files (no JVM)")
    add_pipeline_args(validate)
    validate.set_defaults(handler=_cmd_validate)

    plan = sub.add_parser("plan", help="dry run: what run would create or change, with rendered settings")
    add_pipeline_args(plan)
    plan.add_argument("--json", action="store_true", help="the plan as JSON")
    plan.set_defaults(handler=pipelines.cmd_plan)

    run = sub.add_parser("run", help="run every table of the pipeline(s)")
    add_pipeline_args(run)
    add_run_args(run)
    add_check_arg(run)
    run.set_defaults(handler=pipelines.cmd_run)

    maintain = sub.add_parser("maintain", help="compaction, snapshot expiry, orphan files, manifest rewrites")
    add_pipeline_args(maintain)
    add_check_arg(maintain)
    maintain.set_defaults(handler=pipelines.cmd_maintain)

    verify = sub.add_parser(
        "verify", help="reconcile every committed source offset with the table, the error targets and the drops"
    )
    add_pipeline_args(verify)
    verify.add_argument("--table", help="only this table (namespace.name)")
    verify.add_argument("--json", action="store_true", help="the reconciliation as JSON")
    verify.set_defaults(handler=_cmd_verify)

    metrics = sub.add_parser("metrics", help="Prometheus text of the metrics the runs recorded")
    add_pipeline_args(metrics)
    metrics.add_argument("--dir", help="metrics directory (default: the environment's metrics_dir)")
    metrics.set_defaults(handler=pipelines.cmd_metrics)

    capture = sub.add_parser("capture", help="record a live topic into replay files")
    add_pipeline_args(capture)
    capture.add_argument("--topic", required=True)
    capture.add_argument("--out", required=True, help="directory for the record files")
    capture.add_argument("--format", choices=["parquet", "jsonl"], default="parquet")
    capture.add_argument("--records-per-file", type=int, default=50_000)
    capture.set_defaults(handler=pipelines.cmd_capture)

    demo = sub.add_parser("demo", help="start the stack, write and read back a table, stop the stack")
    demo.add_argument("--run-dir", help="state directory for the demo's stack (wiped first)")
    demo.add_argument("--pipeline", default="pipelines/shop.yml", help="the pipeline to run")
    demo.set_defaults(handler=_cmd_demo)

    add_workspace_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kafka-iceberg``."""
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    return run_guarded(lambda: int(args.handler(args)), verbose=args.verbose)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
