"""``${env:VAR}``, ``${secret:scope/key}`` and ``${local:path}`` references in configuration values.

Files keep the references; values are resolved only when a job runs. Anything that came from a
secret, or sits under a key that names a credential, is masked whenever it is printed, and
resolved secret values are scrubbed from log records by :class:`RedactingFilter`.
"""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_iceberg.errors import KafkaIcebergError, SecretResolutionError

REF = re.compile(r"\$\{(?P<kind>[a-z]+):(?P<name>[^}]*)\}")
KINDS = ("env", "secret", "local")
MASK = "****"
SECRET_ENV_PREFIX = "KAFKA_ICEBERG_SECRET__"
# Keys whose values are credentials whatever their origin (Spark's own redaction regex plus ours).
SENSITIVE_KEY = re.compile(
    r"(?i)secret|password|passwd|token|credential(?!s\.provider$)|access[-_.]?key|sas-token|sas\.|sasl\.jaas"
)  # a credentials *provider* setting names a class, not a credential

_registered_secrets: set[str] = set()


@dataclass(frozen=True)
class Ref:
    """One reference found in a string."""

    kind: str
    name: str
    text: str


def find_refs(value: str) -> list[Ref]:
    """Every ``${kind:name}`` reference in ``value``."""
    return [Ref(m["kind"], m["name"], m[0]) for m in REF.finditer(value)]


def ref_problem(ref: Ref) -> str | None:
    """Why a reference is malformed, or None when it is well-formed."""
    if ref.kind not in KINDS:
        return f"a reference of kind env, secret or local, e.g. ${{env:NAME}} (not {ref.kind!r})"
    if ref.kind == "env" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ref.name):
        return "${env:NAME} with NAME an environment variable name"
    if ref.kind == "secret" and not re.fullmatch(r"[\w.-]+/[\w.-]+", ref.name):
        return "${secret:scope/key}"
    if ref.kind == "local" and not ref.name:
        return "${local:path} such as ${local:kafka.bootstrap}"
    return None


def is_sensitive(key: str, raw: str) -> bool:
    """Whether a setting must be masked when printed."""
    return bool(SENSITIVE_KEY.search(key)) or any(r.kind == "secret" for r in find_refs(raw))


def mask_value(key: str, raw: Any) -> Any:
    """``raw`` unchanged, or the mask when the setting is sensitive."""
    if not isinstance(raw, str) or raw == "":
        return raw
    return MASK if is_sensitive(key, raw) else raw


def mask_mapping(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``conf`` with every sensitive value masked."""
    return {k: mask_value(k, v) for k, v in conf.items()}


def register_secret(value: str) -> None:
    """Remember a resolved secret so the logging filter scrubs it."""
    if len(value) >= 4:
        _registered_secrets.add(value)


def redact(text: str) -> str:
    """``text`` with every registered secret value replaced by the mask."""
    for secret in sorted(_registered_secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Scrubs resolved secret values from every log record passing through it."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102
        if _registered_secrets:
            record.msg = redact(record.getMessage())
            record.args = ()
        return True


SecretFetcher = Callable[[str, str], str]


def workspace_secret(scope: str, key: str) -> str:
    """Read a Databricks secret through databricks-sdk (uses the job's own credentials)."""
    try:
        from databricks.sdk import WorkspaceClient
    except ImportError as exc:  # pragma: no cover - databricks-sdk is a dependency
        raise SecretResolutionError("databricks-sdk is not installed: pip install databricks-sdk") from exc
    try:
        response = WorkspaceClient().secrets.get_secret(scope=scope, key=key)
    except Exception as exc:  # the SDK raises many types; the message is what matters
        raise SecretResolutionError(f"cannot read secret {scope}/{key}: {type(exc).__name__}") from None
    if response.value is None:
        raise SecretResolutionError(f"secret {scope}/{key} has no value")
    return base64.b64decode(response.value).decode()


def secret_env_name(scope: str, key: str) -> str:
    """Environment variable that overrides a secret locally: KAFKA_ICEBERG_SECRET__SCOPE__KEY."""
    return f"{SECRET_ENV_PREFIX}{_env_word(scope)}__{_env_word(key)}"


def _env_word(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", text).upper()


@dataclass
class Resolver:
    """Resolves references in strings.

    Args:
        env: environment variables (defaults to ``os.environ``).
        secrets: fetches ``scope/key`` from a secret store (defaults to the Databricks workspace).
        local: returns the running local stack's description (``kafka-iceberg local status``).
    """

    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    secrets: SecretFetcher = workspace_secret
    local: Callable[[], Mapping[str, Any]] | None = None
    _cache: dict[str, str] = field(default_factory=dict)

    def value(self, raw: str) -> str:
        """``raw`` with every reference replaced by its value.

        Raises:
            SecretResolutionError: a variable is unset, a secret unreadable or the stack not running.
        """
        return REF.sub(lambda m: self._one(Ref(m["kind"], m["name"], m[0])), raw)

    def setting(self, key: str, raw: str) -> str:
        """The value of setting ``key``; a credential's value is also registered for redaction.

        ``${secret:}`` values are always registered; this also covers a password that came from
        ``${env:}`` or inside a composite value (a JAAS line), judged by the setting's key.
        """
        value = self.value(raw)
        if is_sensitive(key, raw):
            register_secret(value)
        return value

    def settings(self, conf: Mapping[str, str]) -> dict[str, str]:
        """:meth:`setting` of every entry."""
        return {k: self.setting(k, v) for k, v in conf.items()}

    def resolve_tree(self, data: Any) -> Any:
        """Resolve references in every string of a nested structure (credentials registered by key)."""
        if isinstance(data, str):
            return self.value(data)
        if isinstance(data, Mapping):
            return {k: self.setting(k, v) if isinstance(v, str) else self.resolve_tree(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.resolve_tree(v) for v in data]
        return data

    def resolve_all(self, data: Any) -> tuple[Any, list[tuple[tuple[str | int, ...], Ref, str]]]:
        """``data`` resolved as :meth:`resolve_tree` resolves it; or None, and each failing reference.

        Every reference is tried before any value is used, so a check reports all that fail at once:
        ``(location in data, reference, why)`` for each place a failing reference sits.
        """
        failures = []
        why: dict[str, str] = {}
        for loc, ref in references_in(data):
            if ref.text not in why:
                try:
                    self._one(ref)
                    why[ref.text] = ""
                except KafkaIcebergError as exc:  # an unset variable, an unreadable secret, no local stack
                    why[ref.text] = str(exc)
            if why[ref.text]:
                failures.append((loc, ref, why[ref.text]))
        if failures:
            return None, failures
        return self.resolve_tree(data), []

    def _one(self, ref: Ref) -> str:
        problem = ref_problem(ref)
        if problem:
            raise SecretResolutionError(f"malformed reference {ref.text}: expected {problem}")
        if ref.text in self._cache:
            return self._cache[ref.text]
        if ref.kind == "env":
            if ref.name not in self.env:
                raise SecretResolutionError(f"environment variable {ref.name} is not set (referenced as {ref.text})")
            result = self.env[ref.name]
        elif ref.kind == "secret":
            scope, key = ref.name.split("/", 1)
            override = self.env.get(secret_env_name(scope, key))
            result = override if override is not None else self.secrets(scope, key)
            register_secret(result)
        else:
            result = self._local(ref)
        self._cache[ref.text] = result
        return result

    def _local(self, ref: Ref) -> str:
        if self.local is None:
            raise SecretResolutionError(f"{ref.text} needs the local stack, which this run does not use")
        node: Any = self.local()
        if not node.get("running", True) or "run_dir" not in node:
            raise SecretResolutionError(f"{ref.text}: the local stack is not running; start it: kafka-iceberg local up")
        for part in ref.name.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise SecretResolutionError(f"{ref.text}: the local stack has no {ref.name!r}")
            node = node[part]
        return "" if node is None else str(node)


def iter_strings(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string in a nested structure with its location."""
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, Mapping):
        for k, v in data.items():
            yield from iter_strings(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from iter_strings(v, (*path, i))


def references_in(data: Any) -> Iterator[tuple[tuple[str | int, ...], Ref]]:
    """Every reference in a nested structure, with the location of the string that holds it."""
    for loc, raw in iter_strings(data):
        for ref in find_refs(raw):
            yield loc, ref
