"""Every exception kafka-iceberg raises, in one place.

Configuration mistakes are :class:`ConfigError`, which carries one :class:`Problem` per
mistake so a user fixes a whole file in one pass. The command line turns it into exit code 2
and a list of lines, never a stack trace. Everything else derives from :class:`KafkaIcebergError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CommitConflictError",
    "CommitMarkerError",
    "ConfigError",
    "ExpectationFailedError",
    "JarResolutionError",
    "KafkaIcebergError",
    "NotInstalledError",
    "Problem",
    "RecordError",
    "SchemaMismatchError",
    "SecretResolutionError",
    "ServiceUnavailableError",
    "StackError",
]

_MAX_VALUE_CHARS = 80
_FRAME = re.compile(r"^\s*(at |\.\.\. \d+ more)")
_PACKAGE = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Z]\w*(?:Exception|Error))\b")
_MAX_REASON = 300


def show_value(value: Any) -> str:
    """Render a user's value for an error message: short, quoted when a string."""
    text = repr(value) if isinstance(value, str) else str(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 3] + "..."
    return text


@dataclass(frozen=True)
class Problem:
    """One configuration mistake: where it is, what was there and what is allowed.

    ``code`` is a stable identifier (``UNKNOWN_KEY``, ``WRONG_TYPE``, ...) so tests and tools
    check the kind of problem rather than the wording.
    """

    file: str
    key_path: str
    value: Any
    expected: str
    code: str = "INVALID_VALUE"
    hint: str = ""

    def __str__(self) -> str:
        where = f"{self.file}: {self.key_path}" if self.key_path else self.file
        got = "nothing" if self.value is _MISSING else show_value(self.value)
        text = f"{where}: got {got}; expected {self.expected}"
        return f"{text} ({self.hint})" if self.hint else text


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
MISSING: Any = _MISSING
"""Sentinel for a required key that was not given at all."""


class KafkaIcebergError(Exception):
    """Base class of every error raised by kafka-iceberg."""


@dataclass
class ConfigError(KafkaIcebergError):
    """A pipeline, environment or bundle file is invalid; lists every problem found."""

    problems: Sequence[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        n = len(self.problems)
        head = f"{n} configuration problem{'s' if n != 1 else ''}:"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])

    @classmethod
    def one(
        cls, file: str, key_path: str, value: Any, expected: str, code: str = "INVALID_VALUE", *, hint: str = ""
    ) -> ConfigError:
        """Build an error holding a single problem."""
        return cls([Problem(file, key_path, value, expected, code, hint)])

    @classmethod
    def merge(cls, errors: Iterable[ConfigError]) -> ConfigError:
        """Combine several errors into one, keeping every problem."""
        return cls([p for e in errors for p in e.problems])


class SecretResolutionError(KafkaIcebergError):
    """A ``${secret:...}`` or ``${env:...}`` reference could not be resolved."""


class NotInstalledError(KafkaIcebergError):
    """An optional dependency is missing; the message says which extra installs it."""


class JarResolutionError(KafkaIcebergError):
    """A JVM jar could not be fetched or its checksum did not match the lock file."""


class StackError(KafkaIcebergError):
    """The embedded local stack failed to start, answer or stop."""


class CommitConflictError(KafkaIcebergError):
    """An Iceberg commit still conflicted after every retry."""


class ServiceUnavailableError(KafkaIcebergError):
    """The catalog, the object store or the Kafka broker stayed unreachable through every outage retry."""

    def __init__(self, message: str, *, service: str, endpoint: str | None, reason: str, retries: int):
        super().__init__(message)
        self.service = service
        self.endpoint = endpoint
        self.reason = reason
        self.retries = retries


class CommitMarkerError(KafkaIcebergError):
    """A commit's idempotency marker could not be written to or read from the snapshot summary."""


class SchemaMismatchError(KafkaIcebergError):
    """A batch's schema differs from the table's in a way the table's ``schema_evolution`` forbids."""

    def __init__(self, message: str, *, table: str, fields: Sequence[str]):
        super().__init__(message)
        self.table = table
        self.fields = tuple(fields)


class ExpectationFailedError(KafkaIcebergError):
    """A record violated an expectation whose action is ``fail``."""


class RecordError(KafkaIcebergError):
    """A bad record stopped the batch (no ``skip_error`` and no error target configured)."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int, stage: str, reason: str):
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.stage = stage
        self.reason = reason


class DataLossError(KafkaIcebergError):
    """Records the run had not read yet are gone from Kafka, and ``kafka.fail_on_data_loss`` is true."""

    @classmethod
    def of(cls, what: str, settings_file: str) -> DataLossError:
        """The error for ``what`` is gone, with what happened to the table and how to go on."""
        where = settings_file or "the environment file"
        return cls(
            f"DATA LOSS: {what}. Records this job had not read yet are no longer in Kafka (retention "
            "removed them, or the topic was deleted and created again); nothing after the last commit "
            "was written. To skip what is gone and read on, set kafka.fail_on_data_loss: false in "
            f"{where}: each range skipped is then logged."
        )


class RegistryUnavailableError(KafkaIcebergError):
    """The schema registry did not answer (or answered with a server error) through every retry."""


# -- one line for a log, from any error (Python or Java behind py4j) ----------------------------
def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes (or contexts), outermost first, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _java_chain(java: Any) -> Iterator[str]:
    # A Java throwable behind a py4j error: toString() of it and of each cause.
    for _ in range(20):
        if java is None:
            return
        try:
            yield str(java.toString())
            java = java.getCause()
        except Exception:  # the JVM may be gone or the object not a Throwable
            return


def messages(exc: BaseException) -> list[str]:
    """Every message in an error and its causes, Python and Java, outermost first, stack frames left out."""
    out: list[str] = []
    for error in error_chain(exc):
        out.append(f"{type(error).__name__}: {error}")
        for attr in ("java_exception", "_origin"):  # Py4JJavaError, pyspark's CapturedException
            out.extend(_java_chain(getattr(error, attr, None)))
    lines: list[str] = []
    for text in out:
        for raw in text.splitlines():
            line = raw.strip()
            if line and not _FRAME.match(line):
                lines.append(line.removeprefix("Caused by: "))
    return lines


def summary(exc: BaseException) -> str:
    """One line for a log: the innermost message of ``exc``, package names left out."""
    lines = messages(exc)
    return short_message(lines[-1]) if lines else type(exc).__name__


def short_message(line: str) -> str:
    """``line`` without Java package names, cut to a log line's length."""
    return _PACKAGE.sub(r"\1", line)[:_MAX_REASON]
