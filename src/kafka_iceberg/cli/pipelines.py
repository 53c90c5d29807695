"""``plan``, ``run``, ``metrics``, ``capture`` and the per-format ``ingest-*`` entry points."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_iceberg.cli.output import EXIT_FAILED, EXIT_OK, emit, emit_json
from kafka_iceberg.observe.summary import summarize, summary_line
from kafka_iceberg.observe.text import table

if TYPE_CHECKING:
    from kafka_iceberg.run import Prepared


def add_pipeline_args(parser: argparse.ArgumentParser, *, pipeline_default: str | None = "pipelines") -> None:
    """``--pipeline``, ``--env`` and ``--catalog``, shared by every command that runs tables."""
    from kafka_iceberg.project import default_env_name

    parser.add_argument(
        "--pipeline",
        default=pipeline_default,
        required=pipeline_default is None,
        help="a pipeline file or a directory of them" + (" (default: pipelines/)" if pipeline_default else ""),
    )
    parser.add_argument("--env", default=default_env_name(), help="environment (default $KAFKA_ICEBERG_ENV or local)")
    parser.add_argument("--catalog", help="catalog profile overriding the tables' own")


def add_check_arg(parser: argparse.ArgumentParser) -> None:
    """``--check``: a job's start-up checks alone, e.g. with only a cluster's variables set."""
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate and resolve every variable and secret the run uses, then exit (no Spark, nothing read)",
    )


def check_start(prepared: Prepared) -> int:
    """What ``--check`` prints once :func:`~kafka_iceberg.run.prepare` validated and resolved what the run uses."""
    emit(
        f"ready: {len(prepared.jobs)} table(s), environment {prepared.env.name}, "
        f"catalog(s) {', '.join(prepared.rendered)}"
    )
    return EXIT_OK


def add_run_args(parser: argparse.ArgumentParser) -> None:
    """Options of long runs."""
    parser.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on 127.0.0.1:PORT while running")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress lines (default: on a terminal)",
    )
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="drain what the topics hold now and exit, whatever each table's trigger says (smoke runs)",
    )


def cmd_plan(args: argparse.Namespace) -> int:
    """Dry run: tables, schemas, partition specs, changes, rendered settings (secrets masked)."""
    from kafka_iceberg.run import catalog_settings, open_session, plan, prepare

    prepared = prepare(Path(args.pipeline), env_name=args.env, catalog=args.catalog)
    spark = open_session(prepared)
    tables = plan(prepared, spark)
    if args.json:
        emit_json({"environment": prepared.env.name, "tables": tables, "catalogs": catalog_settings(prepared)})
        return EXIT_OK
    emit(f"plan for environment {prepared.env.name} (dry run: nothing read, nothing changed)\n")
    for item in tables:
        traits = ", ".join(
            [
                item["format"],
                f"mode {item['mode']}",
                item["commit_mode"],
                f"{item['writer']} writer",
                item["schema_evolution"],
            ]
        )
        emit(f"{item['table']}  [{traits}]")
        for line in item["changes"].splitlines():
            emit(f"  {line}")
        if item["inferred_columns"]:
            emit("  payload columns: inferred from the data on the first batch")
        emit(f"  source: {json.dumps(item['source'], sort_keys=True)}")
        emit(f"  checkpoint: {item['checkpoint']}\n")
    for name, conf in catalog_settings(prepared).items():
        emit(f"catalog {name}:")
        for key, value in sorted(conf.items()):
            emit(f"  {key}={value}")
    return EXIT_OK


def run_tables(args: argparse.Namespace, formats: set[str] | None) -> int:
    """Run the selected tables until drained (available_now) or stopped (processing_time)."""
    from kafka_iceberg.observe.progress import Progress
    from kafka_iceberg.run import observers_for, open_session, prepare, run, stop_on_signals

    available_now = getattr(args, "available_now", False)
    prepared = prepare(
        Path(args.pipeline), env_name=args.env, catalog=args.catalog, formats=formats, available_now=available_now
    )
    if getattr(args, "check", False):
        return check_start(prepared)
    spark = open_session(prepared)
    pipeline_id = prepared.jobs[0].pipeline.pipeline
    observers = observers_for(prepared, spark, pipeline_id, Progress(enabled=args.progress))
    server = observers.metrics.serve(args.metrics_port) if args.metrics_port else None
    try:
        with stop_on_signals() as stop:
            reports = run(prepared, spark, stop=stop, observers=observers)
    finally:
        if server is not None:
            server.shutdown()
    summary = summarize(reports, [job.spec.identifier for job in prepared.jobs])
    columns = ["batches", "records_written", "records_failed", "records_quarantined", "records_published"]
    rows = [[name, *(t[c] for c in columns), t["snapshot_id"]] for name, t in summary["tables"].items()]
    emit(table(rows, ["table", "batches", "written", "bad", "quarantined", "error topic", "last snapshot"]))
    # Last, so it survives a log truncated at the start; `kafka-iceberg workspace` reads it back.
    emit(summary_line(summary))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    """``kafka-iceberg run``: every table of the pipeline(s)."""
    return run_tables(args, None)


def cmd_metrics(args: argparse.Namespace) -> int:
    """Prometheus text rebuilt from the JSON-lines metrics a run left in the environment's metrics_dir."""
    from kafka_iceberg.environment import load_environment, local_resolver
    from kafka_iceberg.observe.metrics import metrics_from_jsonl

    directory = Path(args.dir) if args.dir else None
    if directory is None:
        env = load_environment(args.env, Path(args.pipeline))
        if not env.metrics_dir:
            emit(f"{env.source_file} sets no metrics_dir", sys.stderr)
            return EXIT_FAILED
        directory = Path(local_resolver().value(env.metrics_dir))
    files = sorted(directory.glob("*.jsonl")) if directory.exists() else []
    sys.stdout.write(metrics_from_jsonl(files).prometheus_text())
    return EXIT_OK


def cmd_capture(args: argparse.Namespace) -> int:
    """Record a live topic into replay files."""
    from kafka_iceberg.environment import load_environment, local_resolver
    from kafka_iceberg.source.capture import capture
    from kafka_iceberg.source.kafka import resolved_client_config

    env = load_environment(args.env, Path(args.pipeline))
    config = resolved_client_config(env.kafka, "consumer", local_resolver())
    count = capture(config, args.topic, Path(args.out), fmt=args.format, records_per_file=args.records_per_file)
    emit(f"captured {count} record(s) of {args.topic} into {args.out}")
    return EXIT_OK


def cmd_maintain(args: argparse.Namespace) -> int:
    """Maintain every table of the pipeline(s), their quarantine tables and the event log."""
    from kafka_iceberg.maintain import TableMaintainer
    from kafka_iceberg.observe.progress import Progress
    from kafka_iceberg.run import maintenance_targets, observers_for, open_session, prepare

    prepared = prepare(Path(args.pipeline), env_name=args.env, catalog=args.catalog)
    if getattr(args, "check", False):
        return check_start(prepared)
    spark = open_session(prepared)
    observers = observers_for(prepared, spark, prepared.jobs[0].pipeline.pipeline, Progress(enabled=False))
    rows = []
    failed = False
    for pipeline_id, catalog, spec in maintenance_targets(prepared, spark):
        for report in TableMaintainer(spark, catalog, spec, pipeline_id).run():
            observers.on_maintenance(report)
            failed = failed or report.error is not None
            summary = report.error or ", ".join(f"{k}={v}" for k, v in report.details.items() if k != "locations")
            rows.append([spec.identifier, report.action, f"{report.duration_s:.1f}s", summary])
    observers.close()
    emit(table(rows, ["table", "action", "took", "result"]))
    return EXIT_FAILED if failed else EXIT_OK
