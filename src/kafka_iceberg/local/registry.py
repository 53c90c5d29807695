"""A Confluent-compatible schema registry for the local stack: in memory, standard library only.

Neither a Java registry (Apicurio's Quarkus modules, Confluent's) nor Karapace can be installed
from the registries this project builds from (docs/local-stack.md says why), so the local stack
serves the subset of the Confluent REST API that producers (confluent-kafka's serializers) and
kafka-iceberg use: register and look up schemas under subjects, schemas by id, subject versions
(``latest`` included), references, ``format=serialized`` for Protobuf as stored, and the
compatibility config (accepted, not enforced). Schemas live in memory and do not survive
``local down``. On clusters the same settings point at Confluent Schema Registry, Redpanda's or
Apicurio's ``/apis/ccompat/v7``.

Run: ``python -m kafka_iceberg.local.registry --port 8081`` (binds 127.0.0.1).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_CONTENT = "application/vnd.schemaregistry.v1+json"


class Store:
    """Schemas by id and subjects' versions, guarded by one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: list[dict[str, Any]] = []  # id - 1 → {schema, schemaType, references}
        self.subjects: dict[str, list[int]] = {}  # subject → schema ids by version - 1
        self.compatibility = "BACKWARD"

    @staticmethod
    def _identity(body: dict[str, Any]) -> str:
        refs = [{k: r[k] for k in ("name", "subject", "version")} for r in body.get("references") or []]
        return json.dumps([body.get("schemaType") or "AVRO", _canonical(body["schema"]), refs])

    def register(self, subject: str, body: dict[str, Any]) -> int:
        """Register a schema under ``subject`` (the same schema keeps its id); returns the id."""
        with self.lock:
            identity = self._identity(body)
            for i, known in enumerate(self.schemas):
                if self._identity(known) == identity:
                    schema_id = i + 1
                    break
            else:
                self.schemas.append(
                    {
                        "schema": body["schema"],
                        "schemaType": body.get("schemaType") or "AVRO",
                        "references": body.get("references") or [],
                    }
                )
                schema_id = len(self.schemas)
            versions = self.subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id

    def lookup(self, subject: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The version of ``subject`` holding this schema, or None."""
        with self.lock:
            identity = self._identity(body)
            for version, schema_id in enumerate(self.subjects.get(subject, []), start=1):
                if self._identity(self.schemas[schema_id - 1]) == identity:
                    return self._version(subject, version)
            return None

    def _version(self, subject: str, version: int) -> dict[str, Any]:
        schema_id = self.subjects[subject][version - 1]
        return {"subject": subject, "version": version, "id": schema_id, **self.schemas[schema_id - 1]}

    def version(self, subject: str, which: str) -> dict[str, Any] | None:
        """Version ``which`` (a number or ``latest``) of ``subject``, or None."""
        with self.lock:
            versions = self.subjects.get(subject)
            if not versions:
                return None
            number = len(versions) if which in ("latest", "-1") else int(which)
            if not 1 <= number <= len(versions):
                return None
            return self._version(subject, number)


def _canonical(schema: str) -> str:
    try:
        return json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return schema.strip()


def handler(store: Store) -> type[BaseHTTPRequestHandler]:
    """A request handler class serving ``store``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", _CONTENT)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _missing(self, code: int, message: str) -> None:
            self._send(404, {"error_code": code, "message": message})

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            data: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
            return data

        def do_GET(self) -> None:
            path = urllib.parse.urlparse(self.path).path.rstrip("/")
            if path in ("", "/subjects"):
                with store.lock:
                    self._send(200, sorted(store.subjects) if path else {})
                return
            if path in ("/config", "/mode"):
                self._send(200, {"compatibilityLevel": store.compatibility, "mode": "READWRITE"})
                return
            if m := re.fullmatch(r"/schemas/ids/(\d+)(/schema)?", path):
                schema_id = int(m[1])
                with store.lock:
                    if not 1 <= schema_id <= len(store.schemas):
                        self._missing(40403, f"Schema {schema_id} not found")
                        return
                    found = store.schemas[schema_id - 1]
                self._send(200, found["schema"] if m[2] else {"id": schema_id, **found})
                return
            if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
                subject = urllib.parse.unquote(m[1])
                with store.lock:
                    versions = store.subjects.get(subject)
                if not versions:
                    self._missing(40401, f"Subject '{subject}' not found.")
                    return
                self._send(200, list(range(1, len(versions) + 1)))
                return
            if m := re.fullmatch(r"/subjects/([^/]+)/versions/([^/]+)(/schema)?", path):
                subject = urllib.parse.unquote(m[1])
                version = store.version(subject, m[2])
                if version is None:
                    self._missing(40402, f"Version {m[2]} of subject '{subject}' not found.")
                    return
                self._send(200, version["schema"] if m[3] else version)
                return
            self._missing(404, f"no such resource {path}")

        def do_POST(self) -> None:
            path = urllib.parse.urlparse(self.path).path.rstrip("/")
            body = self._body()
            if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
                self._send(200, {"id": store.register(urllib.parse.unquote(m[1]), body)})
                return
            if m := re.fullmatch(r"/subjects/([^/]+)", path):
                found = store.lookup(urllib.parse.unquote(m[1]), body)
                if found is None:
                    self._missing(40403, "Schema not found")
                    return
                self._send(200, found)
                return
            if re.fullmatch(r"/compatibility/subjects/[^/]+/versions/[^/]+", path):
                self._send(200, {"is_compatible": True})
                return
            self._missing(404, f"no such resource {path}")

        def do_PUT(self) -> None:
            body = self._body()
            if "compatibility" in body:
                store.compatibility = str(body["compatibility"])
            self._send(200, body)

    return Handler


def serve(port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A started server on ``host:port`` (port 0: any free port); stop it with ``shutdown()``."""
    server = ThreadingHTTPServer((host, port), handler(Store()))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    """Command line: serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m kafka_iceberg.local.registry")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), handler(Store()))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
