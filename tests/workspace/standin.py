"""A local HTTP stand-in for the parts of the Databricks Jobs REST API the workspace commands call.

The real ``WorkspaceClient`` talks to it over HTTP; every request is recorded so tests check what
was sent. Runs follow a script: each ``runs/get`` of a run returns the next state in its list
(the last one repeats).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "dapi-fake-smoke-token-0123456789"
STAGING_ROOT = "/Workspace/Users/5f3c2a9e-1d47-4b8a-9c61-0e2f4a7b8c90/.bundle/kafka_iceberg/staging"
TASK_RUN_OFFSET = 100_000
FORMATS = ["avro", "binary", "csv", "flatten", "json", "text"]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any]
    authorization: str | None


@dataclass
class Workspace:
    """What the stand-in knows: jobs, scripted runs, task outputs; and what it was asked."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    # job_id -> states each runs/get of its next triggered run returns, in order
    scripts: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # job_id -> logs of its runs' task output (get-output)
    logs: dict[int, str] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    run_logs: dict[int, str] = field(default_factory=dict)  # run_id -> logs, before the job's own
    # job_id -> runs runs/list returns, newest first (each {"run_id", "state", ...})
    history: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # run_id -> {"job_id", "gets"}
    task_runs: dict[int, int] = field(default_factory=dict)  # task run id -> job_id
    next_run: int = 1000
    # scope -> key -> value: the workspace's secret scopes (`databricks secrets put-secret`), which
    # a job cluster reads for its {{secrets/<scope>/<key>}} variables when it starts
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)

    def secret(self, scope: str, key: str) -> str | None:
        """The value of ``scope/key``, or None when the scope or the key does not exist."""
        return self.secrets.get(scope, {}).get(key)

    def api_calls(self) -> list[Request]:
        return [r for r in self.requests if r.path.startswith("/api/")]

    def calls(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and r.path == path]

    # -- handlers ------------------------------------------------------------------------------
    def handle(self, req: Request) -> tuple[int, dict[str, Any]]:
        self.requests.append(req)
        if req.path.startswith("/.well-known/"):  # the SDK's unauthenticated host-metadata probe
            return 404, {"error_code": "NOT_FOUND", "message": "no host metadata in the stand-in"}
        if req.authorization != f"Bearer {TOKEN}":
            return 401, {"error_code": "UNAUTHENTICATED", "message": "bad token"}
        route = (req.method, req.path)
        if route == ("GET", "/api/2.2/jobs/list"):
            return 200, {"jobs": self.jobs, "has_more": False}
        if route == ("POST", "/api/2.2/jobs/run-now"):
            job_id = int(req.body["job_id"])
            if job_id not in {j["job_id"] for j in self.jobs}:
                return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": f"Job {job_id} does not exist."}
            self.next_run += 1
            self.runs[self.next_run] = {"job_id": job_id, "gets": 0}
            return 200, {"run_id": self.next_run, "number_in_job": 1}
        if route == ("GET", "/api/2.2/jobs/runs/get"):
            return self._get_run(int(req.query["run_id"]))
        if route == ("GET", "/api/2.2/jobs/runs/get-output"):
            task_run = int(req.query["run_id"])
            if task_run not in self.task_runs:
                return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": f"Run {task_run} does not exist."}
            job_id = self.task_runs[task_run]
            out: dict[str, Any] = {"metadata": {"run_id": task_run}}
            logs = self.run_logs.get(task_run - TASK_RUN_OFFSET, self.logs.get(job_id))
            if logs is not None:
                out["logs"] = logs
            if job_id in self.errors:
                out["error"] = self.errors[job_id]
            return 200, out
        if route == ("POST", "/api/2.2/jobs/runs/cancel"):
            return 200, {}
        if route == ("GET", "/api/2.2/jobs/runs/list"):
            runs = self.history.get(int(req.query["job_id"]), [])[: int(req.query.get("limit", 25))]
            for run in runs:
                self.runs.setdefault(run["run_id"], {"job_id": int(req.query["job_id"]), "gets": 0, "fixed": run})
            return 200, {"runs": [self._brief(r, int(req.query["job_id"])) for r in runs], "has_more": False}
        return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": f"no {req.method} {req.path} in the stand-in"}

    def _brief(self, run: dict[str, Any], job_id: int) -> dict[str, Any]:
        return {"job_id": job_id, "run_page_url": f"https://ws.example/jobs/{job_id}/runs/{run['run_id']}", **run}

    def _get_run(self, run_id: int) -> tuple[int, dict[str, Any]]:
        if run_id not in self.runs:
            return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": f"Run {run_id} does not exist."}
        entry = self.runs[run_id]
        job_id = entry["job_id"]
        if "fixed" in entry:
            state = entry["fixed"]
        else:
            script = self.scripts.get(job_id) or [
                {"state": {"life_cycle_state": "TERMINATED", "result_state": "SUCCESS"}}
            ]
            state = script[min(entry["gets"], len(script) - 1)]
        entry["gets"] += 1
        run = self._brief({"run_id": run_id, **state}, job_id)
        run.setdefault("start_time", 1_700_000_000_000)
        run["tasks"] = [{"task_key": "ingest", "run_id": run_id + TASK_RUN_OFFSET}]
        self.task_runs[run_id + TASK_RUN_OFFSET] = job_id
        return 200, run


def bundle_job(
    job_id: int, name: str, root: str | None = STAGING_ROOT, params: list[str] | None = None
) -> dict[str, Any]:
    """A job as jobs/list (expand_tasks) shows a bundle-deployed one; ``root=None``: made by hand."""
    settings: dict[str, Any] = {
        "name": name,
        "tasks": [
            {
                "task_key": "ingest",
                "python_wheel_task": {
                    "package_name": "kafka_iceberg",
                    "entry_point": "ingest-x",
                    "parameters": params
                    if params is not None
                    else ["--pipeline", f"{root}/files/pipelines/shop.yml", "--env", "staging", "--catalog", "lake"],
                },
            }
        ],
    }
    if root is not None:
        settings["deployment"] = {"kind": "BUNDLE", "metadata_file_path": f"{root}/state/metadata.json"}
    return {"job_id": job_id, "settings": settings, "created_time": 1}


def staging_jobs() -> list[dict[str, Any]]:
    """The six staging ingest jobs (ids 11..16), a prod copy, a hand-made copy and the maintenance job."""
    jobs = [bundle_job(11 + i, f"kafka_iceberg_ingest_{fmt}_lake") for i, fmt in enumerate(FORMATS)]
    prod_root = STAGING_ROOT.replace("5f3c2a9e-1d47-4b8a-9c61-0e2f4a7b8c90", "a7d91e04-6b3c-4f25-8e1a-2c9b0d5f6e31")
    jobs.append(bundle_job(90, "kafka_iceberg_ingest_json_lake", root=prod_root.removesuffix("staging") + "prod"))
    jobs.append(bundle_job(91, "kafka_iceberg_ingest_json_lake", root=None))
    jobs.append(bundle_job(92, "kafka_iceberg_maintain_tables"))
    return jobs


def summary_logs(written: int, failed: int = 0, table: str = "sales.orders", lag: int | None = 0) -> str:
    from kafka_iceberg.observe.summary import summary_line

    tables = {
        table: {
            "batches": 1, "records_written": written, "records_failed": failed,
            "last_commit": "2024-05-01T10:00:00+00:00" if written else None, "snapshot_id": 7 if written else None,
            "lag": lag,
        }
    }  # fmt: skip
    summary = {"records_written": written, "records_failed": failed, "tables": tables}
    return "INFO starting\ntable  batches\n-----\n" + summary_line(summary) + "\n"


@contextmanager
def serve(workspace: Workspace) -> Iterator[str]:
    """Serve ``workspace`` on 127.0.0.1 at a free port; yields its base URL; stops on exit."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            status, payload = workspace.handle(
                Request(self.command, parts.path, query, body, self.headers.get("Authorization"))
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _answer
        do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
