"""``kafka-iceberg workspace smoke`` against the stand-in: requests sent and exit codes."""

from __future__ import annotations

import json

import pytest

from kafka_iceberg.cli.main import main
from tests.workspace.standin import FORMATS, STAGING_ROOT, TOKEN, Workspace, summary_logs

STAGING_IDS = [11, 12, 13, 14, 15, 16]
FAST = ["--poll", "0.01", "--timeout", "10"]
DONE = {"state": {"life_cycle_state": "TERMINATED", "result_state": "SUCCESS"}, "run_duration": 93_000}


def _all_write(ws: Workspace, written: int = 5) -> None:
    for job_id in STAGING_IDS:
        ws.logs[job_id] = summary_logs(written, failed=1)
        ws.scripts[job_id] = [DONE]


def _smoke(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["workspace", "smoke", "--target", "staging", *FAST, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_smoke_triggers_each_staging_ingest_job_once_with_available_now(workspace, capsys):
    _all_write(workspace)

    code, out, err = _smoke(capsys)

    assert code == 0, out + err
    runs = workspace.calls("POST", "/api/2.2/jobs/run-now")
    assert [r.body["job_id"] for r in runs] == STAGING_IDS  # not the prod copy (90), hand-made (91), maintenance (92)
    for r in runs:
        assert r.body["python_params"] == [
            "--pipeline", f"{STAGING_ROOT}/files/pipelines/shop.yml",
            "--env", "staging", "--catalog", "lake", "--available-now",
        ]  # fmt: skip
    assert all(r.authorization == f"Bearer {TOKEN}" for r in workspace.api_calls())
    outputs = workspace.calls("GET", "/api/2.2/jobs/runs/get-output")
    assert sorted(int(r.query["run_id"]) for r in outputs) == [
        100_000 + run for run in range(1001, 1001 + len(FORMATS))
    ]
    for fmt, run_id in zip(FORMATS, range(1001, 1001 + len(FORMATS)), strict=True):
        line = next(line for line in out.splitlines() if line.startswith(f"kafka_iceberg_ingest_{fmt}_lake "))
        assert line.split()[1:5] == ["SUCCESS", "93s", "5", "1"]
        assert line.endswith(f"/runs/{run_id}")
    assert "all jobs wrote records" in out
    assert TOKEN not in out + err


def test_smoke_waits_through_pending_and_running(workspace, capsys):
    _all_write(workspace)
    workspace.scripts[13] = [
        {"state": {"life_cycle_state": "PENDING"}},
        {"state": {"life_cycle_state": "RUNNING"}},
        {"state": {"life_cycle_state": "RUNNING"}},
        DONE,
    ]

    code, out, err = _smoke(capsys)

    assert code == 0, out + err
    gets = [int(r.query["run_id"]) for r in workspace.calls("GET", "/api/2.2/jobs/runs/get")]
    assert gets.count(1003) == 4
    assert gets.count(1002) == 1  # a finished run is not asked again


def test_smoke_fails_when_a_job_fails(workspace, capsys):
    _all_write(workspace)
    workspace.scripts[14] = [
        {"state": {"life_cycle_state": "TERMINATED", "result_state": "FAILED", "state_message": "Task ingest failed"}}
    ]
    workspace.errors[14] = "RecordError: bad record at sales.orders-0@17\nTraceback..."

    code, out, _ = _smoke(capsys)

    assert code == 1
    assert (
        "FAILED kafka_iceberg_ingest_flatten_lake: run ended FAILED: RecordError: bad record at sales.orders-0@17"
        in out
    )
    assert "1 of 6 job(s) failed" in out


def test_smoke_fails_when_a_job_writes_nothing(workspace, capsys):
    _all_write(workspace)
    workspace.logs[15] = summary_logs(0)

    code, out, _ = _smoke(capsys)

    assert code == 1
    assert "FAILED kafka_iceberg_ingest_json_lake: wrote nothing" in out


def test_smoke_fails_when_the_output_has_no_summary(workspace, capsys):
    _all_write(workspace)
    workspace.logs[16] = "an ingest built before the summary line existed\n"

    code, out, _ = _smoke(capsys)

    assert code == 1
    assert "FAILED kafka_iceberg_ingest_text_lake: no kafka-iceberg summary line" in out


def test_smoke_timeout_cancels_the_runs_still_going(workspace, capsys):
    _all_write(workspace)
    workspace.scripts[13] = [{"state": {"life_cycle_state": "RUNNING"}}]

    code = main(["workspace", "smoke", "--target", "staging", "--poll", "0.01", "--timeout", "0.3"])
    out, _ = capsys.readouterr()

    assert code == 1
    cancels = workspace.calls("POST", "/api/2.2/jobs/runs/cancel")
    assert [r.body["run_id"] for r in cancels] == [1003]
    assert "FAILED kafka_iceberg_ingest_csv_lake: still running after 0.3s; cancelled" in out
    line = next(line for line in out.splitlines() if line.startswith("kafka_iceberg_ingest_csv_lake "))
    assert line.split()[1] == "TIMEOUT"


def test_smoke_with_a_job_missing_triggers_nothing(workspace, capsys):
    workspace.jobs = [j for j in workspace.jobs if j["job_id"] != 16]
    _all_write(workspace)

    code, _, err = _smoke(capsys)

    assert code == 1
    assert "not deployed to target staging: kafka_iceberg_ingest_text_lake (nothing was triggered)" in err
    assert workspace.calls("POST", "/api/2.2/jobs/run-now") == []


def test_smoke_json_report(workspace, capsys):
    _all_write(workspace, written=3)
    workspace.logs[12] = summary_logs(0)

    code, out, _ = _smoke(capsys, "--json")

    report = json.loads(out)
    assert code == 1
    assert report["ok"] is False
    by_job = {j["job_id"]: j for j in report["jobs"]}
    assert by_job[12]["problem"] == "wrote nothing"
    assert by_job[13] == {
        "job": "kafka_iceberg_ingest_csv_lake", "job_id": 13, "run_id": 1003, "state": "SUCCESS",
        "duration_s": 93.0, "records_written": 3, "records_failed": 1,
        "url": "https://ws.example/jobs/13/runs/1003", "ok": True, "problem": None,
    }  # fmt: skip


def test_unknown_target_is_a_configuration_error(workspace, capsys):
    code = main(["workspace", "smoke", "--target", "qa"])
    _, err = capsys.readouterr()

    assert code == 2
    assert "expected one of dev, local, prod, staging" in err  # `local`: the harness target
    assert workspace.api_calls() == []


def test_a_rejected_token_fails_without_printing_it(workspace, capsys, monkeypatch):
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-wrong-token-abcdef987654")

    code = main(["workspace", "smoke", "--target", "staging", *FAST])
    out, err = capsys.readouterr()

    assert code == 1
    assert "dapi-wrong-token-abcdef987654" not in out + err
    assert workspace.calls("POST", "/api/2.2/jobs/run-now") == []
