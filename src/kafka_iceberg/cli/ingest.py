"""Console entry points, one per message format: what the bundle's python_wheel_tasks run.

``ingest-json --pipeline pipelines/shop.yml --env dev --catalog lake`` runs the JSON tables of
the pipeline file against the ``lake`` catalog profile of ``environments/dev.yml``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kafka_iceberg.cli.output import run_guarded, setup_logging
from kafka_iceberg.cli.pipelines import add_check_arg, add_pipeline_args, add_run_args, cmd_maintain, run_tables


def _ingest(fmt: str, argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"ingest-{fmt.replace('_', '-')}", description=f"Ingest the {fmt.upper()} tables of a pipeline."
    )
    add_pipeline_args(parser, pipeline_default=None)
    add_run_args(parser)
    add_check_arg(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    return run_guarded(lambda: run_tables(args, {fmt}), verbose=args.verbose)


def ingest_text(argv: Sequence[str] | None = None) -> None:
    """``ingest-text``."""
    sys.exit(_ingest("text", argv))


def ingest_csv(argv: Sequence[str] | None = None) -> None:
    """``ingest-csv``."""
    sys.exit(_ingest("csv", argv))


def ingest_json(argv: Sequence[str] | None = None) -> None:
    """``ingest-json``."""
    sys.exit(_ingest("json", argv))


def ingest_flatten(argv: Sequence[str] | None = None) -> None:
    """``ingest-flatten``."""
    sys.exit(_ingest("flatten", argv))


def ingest_binary(argv: Sequence[str] | None = None) -> None:
    """``ingest-binary``."""
    sys.exit(_ingest("binary", argv))


def ingest_avro(argv: Sequence[str] | None = None) -> None:
    """``ingest-avro``: Avro through a schema registry (Confluent wire format), or plain Avro."""
    sys.exit(_ingest("avro", argv))


def ingest_protobuf(argv: Sequence[str] | None = None) -> None:
    """``ingest-protobuf``: Protobuf through a schema registry."""
    sys.exit(_ingest("protobuf", argv))


def ingest_json_schema(argv: Sequence[str] | None = None) -> None:
    """``ingest-json-schema``: JSON Schema through a schema registry."""
    sys.exit(_ingest("json_schema", argv))


def maintain_tables(argv: Sequence[str] | None = None) -> None:
    """``maintain-tables``: the scheduled maintenance job's entry point."""
    parser = argparse.ArgumentParser(prog="maintain-tables", description="Maintain the tables of a pipeline.")
    add_pipeline_args(parser, pipeline_default=None)
    add_check_arg(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    sys.exit(run_guarded(lambda: cmd_maintain(args), verbose=args.verbose))
