"""How the command line reports errors and output.

Configuration errors become lines and exit code 2, other errors one message and exit code 1;
secrets are scrubbed from everything printed.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any, TextIO

from kafka_iceberg.errors import ConfigError, KafkaIcebergError
from kafka_iceberg.refs import RedactingFilter, redact

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2


def setup_logging(verbose: bool = False) -> None:
    """Log to stderr through the secret-redacting filter."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for noisy in ("py4j", "urllib3", "botocore", "pyiceberg"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # An error raised in a streaming batch is reported once, by the run, as the batch raised it
    # (run.streaming.RunningQuery); py4j's callback server would log it again with a traceback.
    # Never DEBUG: py4j then logs every command it sends, credentials included.
    logging.getLogger("py4j.clientserver").setLevel(logging.WARNING if verbose else logging.CRITICAL)


def emit(text: str, stream: TextIO | None = None) -> None:
    """Print ``text`` with every known secret value masked."""
    print(redact(text), file=stream or sys.stdout, flush=True)


def emit_json(data: Any) -> None:
    """Print one JSON document."""
    emit(json.dumps(data, indent=2, sort_keys=False, default=str))


def run_guarded(action: Callable[[], int], *, verbose: bool = False) -> int:
    """Run a command; turn errors into messages and exit codes rather than stack traces.

    Configuration errors exit with 2, everything else with 1. Failures from Spark, the catalog or
    Kafka get a one-line summary; ``-v`` shows their stack trace too.
    """
    try:
        return action()
    except ConfigError as exc:
        emit(str(exc), sys.stderr)
        return EXIT_CONFIG
    except KafkaIcebergError as exc:
        emit(f"error: {exc}", sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        emit("interrupted", sys.stderr)
        return 130
    except Exception as exc:  # Spark, py4j, the catalog, the network: say what failed, in one line
        if verbose:
            logging.getLogger("kafka_iceberg").exception("failed")
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        summary = next((line for line in lines if "Exception" in line or "Error" in line), lines[0] if lines else "")
        emit(f"error: {type(exc).__name__}: {summary[:500]}", sys.stderr)
        if not verbose:
            emit("(run again with -v for the stack trace)", sys.stderr)
        return EXIT_FAILED
