"""A Confluent-compatible schema registry client: writer schemas by id and latest schemas by subject.

Works with Confluent Schema Registry, Redpanda's, Apicurio's ``/apis/ccompat/v7`` and Karapace:
only the common REST API is used (``GET /schemas/ids/{id}``, ``GET /subjects/{s}/versions/{v}``).
Answers are cached per process (a schema id never changes meaning). A 404 is an answer (unknown
id or subject); a connection failure, a timeout or a 5xx is retried ``retries`` times with
exponential backoff, then raises :class:`~kafka_iceberg.errors.RegistryUnavailableError`: the
batch fails, nothing of it is committed, and no record is dropped.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from kafka_iceberg.errors import RegistryUnavailableError

SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json_schema": "JSON"}
_BACKOFF_S = 0.2


@dataclass(frozen=True)
class Reference:
    """A schema another schema imports (Protobuf imports, Avro named types, JSON ``$ref``)."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry holds it."""

    id: int
    schema: str
    schema_type: str = "AVRO"  # AVRO, PROTOBUF or JSON
    references: tuple[Reference, ...] = ()
    subject: str | None = None
    version: int | None = None


@dataclass
class RegistryClient:
    """Reads schemas from a Confluent-compatible registry.

    Args:
        url: base URL (``http://host:8081``, ``https://.../apis/ccompat/v7``).
        username, password: HTTP basic credentials (Confluent Cloud API keys), or
        bearer: a bearer token.
        retries: attempts after the first on connection failures, timeouts and 5xx answers.
        timeout: seconds per request.
    """

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    bearer: str | None = field(default=None, repr=False)
    retries: int = 3
    timeout: float = 10.0
    _by_id: dict[tuple[int, str], RegisteredSchema | None] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def by_id(self, schema_id: int, schema_type: str = "AVRO") -> RegisteredSchema | None:
        """The schema with ``schema_id``, or None when the registry has none (cached either way)."""
        key = (schema_id, schema_type)
        with self._lock:
            if key in self._by_id:
                return self._by_id[key]
        body = self._get_schema(f"/schemas/ids/{schema_id}", schema_type)
        found = None if body is None else _registered(body, schema_id=schema_id)
        with self._lock:
            self._by_id[key] = found
        return found

    def version(
        self, subject: str, version: int | str = "latest", schema_type: str = "AVRO"
    ) -> RegisteredSchema | None:
        """A version of ``subject`` (``latest`` by default), or None when the subject has none."""
        body = self._get_schema(f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}", schema_type)
        return None if body is None else _registered(body)

    def _get_schema(self, path: str, schema_type: str) -> dict[str, Any] | None:
        if schema_type != "PROTOBUF":
            return self._get(path)
        # Protobuf as a serialized descriptor when the registry can (Confluent converts its .proto
        # text), else as stored: Apicurio keeps what confluent-kafka registered (a base64 descriptor)
        # and answers format=serialized with HTTP 500. Either form decodes (protobuf._to_file).
        try:
            return self._get(f"{path}?format=serialized", format_query=True)
        except _FormatRefusedError:
            return self._get(path)

    def _get(self, path: str, *, format_query: bool = False) -> dict[str, Any] | None:
        headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if self.bearer:
            headers["Authorization"] = f"Bearer {self.bearer}"
        elif self.username is not None:
            token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        request = urllib.request.Request(self.url.rstrip("/") + path, headers=headers)
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(_BACKOFF_S * 2 ** (attempt - 1))
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                    data: dict[str, Any] = json.loads(resp.read())
                    return data
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                if exc.code == 500 and format_query:
                    raise _FormatRefusedError(path) from None
                if exc.code < 500:
                    raise RegistryUnavailableError(
                        f"schema registry {self.url} refused GET {path}: HTTP {exc.code} {_text(exc)}"
                    ) from None
                last = f"HTTP {exc.code} {_text(exc)}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = str(getattr(exc, "reason", exc))
        raise RegistryUnavailableError(
            f"schema registry {self.url} unavailable for GET {path} after {self.retries + 1} attempts: {last}"
        )


class _FormatRefusedError(Exception):
    """The registry answered a ``format=`` query with a server error: ask for the schema as stored."""


def _text(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode(errors="replace")[:200]
    except Exception:
        return ""


def _registered(body: dict[str, Any], schema_id: int | None = None) -> RegisteredSchema:
    refs = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or [])
    return RegisteredSchema(
        id=int(body.get("id", schema_id or 0)),
        schema=str(body["schema"]),
        schema_type=str(body.get("schemaType") or "AVRO"),
        references=refs,
        subject=body.get("subject"),
        version=body.get("version"),
    )


def subject_name(strategy: str, topic: str, record: str | None, *, is_key: bool) -> str | None:
    """The subject a schema is registered under (Confluent's subject name strategies).

    ``topic``: ``<topic>-value`` (``-key``); ``record``: the record's full name; ``topic_record``:
    ``<topic>-<record full name>``. None when the strategy needs a record name that is not known.
    """
    if strategy == "topic":
        return f"{topic}-{'key' if is_key else 'value'}"
    if record is None:
        return None
    return record if strategy == "record" else f"{topic}-{record}"
