"""``kafka-iceberg workspace status`` against the stand-in."""

from __future__ import annotations

import json

from kafka_iceberg.cli.main import main
from kafka_iceberg.observe.summary import summary_line
from tests.workspace.standin import Workspace, summary_logs

OK = {"life_cycle_state": "TERMINATED", "result_state": "SUCCESS"}


def _run(run_id: int, state: dict[str, str], start: int = 1_714_557_600_000) -> dict[str, object]:
    return {"run_id": run_id, "state": state, "start_time": start, "run_duration": 61_000}


def _history(ws: Workspace) -> None:
    for job_id in (11, 12, 13, 14, 15, 16):
        ws.history[job_id] = [_run(job_id * 100, OK)]
    # json: the latest run found nothing new; the commit time and lag come from the run before it
    ws.history[14] = [_run(1402, OK), _run(1401, OK)]
    ws.run_logs[1402] = summary_logs(0, lag=None)
    ws.run_logs[1401] = summary_logs(40, table="sales.orders", lag=3)
    ws.logs[14] = summary_line({"records_written": 0, "records_failed": 0, "tables": {}})
    # csv: its latest run failed
    ws.history[12] = [_run(1202, {"life_cycle_state": "TERMINATED", "result_state": "FAILED"}), _run(1201, OK)]
    ws.run_logs[1201] = summary_logs(5, table="sales.returns", lag=0)
    # text: a run is in progress
    ws.history[15] = [_run(1502, {"life_cycle_state": "RUNNING"}), _run(1501, OK)]
    ws.run_logs[1501] = summary_logs(2, table="logs.lines", lag=11)


def test_status_reports_latest_runs_commits_and_lag(workspace, capsys):
    _history(workspace)

    code = main(["workspace", "status", "--target", "staging", "--json"])
    report = json.loads(capsys.readouterr().out)

    assert code == 1  # the csv job's latest run failed
    jobs = {j["job_id"]: j for j in report["jobs"]}
    assert report["missing"] == []
    assert jobs[12]["state"] == "FAILED" and jobs[12]["run_id"] == 1202
    assert jobs[12]["tables"] == {
        "sales.returns": {"last_commit": "2024-05-01T10:00:00+00:00", "snapshot_id": 7, "lag": 0}
    }
    assert jobs[14]["state"] == "SUCCESS" and jobs[14]["run_id"] == 1402 and jobs[14]["records_written"] == 0
    assert jobs[14]["tables"]["sales.orders"] == {
        "last_commit": "2024-05-01T10:00:00+00:00",
        "snapshot_id": 7,
        "lag": 3,
    }
    assert jobs[15]["state"] == "RUNNING" and jobs[15]["run_id"] == 1502
    assert jobs[15]["tables"]["logs.lines"]["lag"] == 11
    lists = workspace.calls("GET", "/api/2.2/jobs/runs/list")
    assert sorted(int(r.query["job_id"]) for r in lists) == [11, 12, 13, 14, 15, 16]
    assert {r.query["limit"] for r in lists} == {"10"}
    assert workspace.calls("POST", "/api/2.2/jobs/run-now") == []  # status never triggers anything
    gets = sorted(int(r.query["run_id"]) for r in workspace.calls("GET", "/api/2.2/jobs/runs/get"))
    assert 1502 not in gets  # a running run has no output to read yet


def test_status_of_healthy_jobs_exits_0_and_prints_tables(workspace, capsys):
    for job_id in (11, 12, 13, 14, 15, 16):
        workspace.history[job_id] = [_run(job_id * 100, OK)]
        workspace.logs[job_id] = summary_logs(9, table=f"ns.t{job_id}", lag=None)

    code = main(["workspace", "status", "--target", "staging"])
    out = capsys.readouterr().out

    assert code == 0, out
    assert "kafka_iceberg_ingest_json_lake     SUCCESS     2024-05-01T10:00:00+00:00  61s" in out
    assert "ns.t14  2024-05-01T10:00:00+00:00  unknown" in out


def test_status_of_prod_names_the_jobs_not_deployed(workspace, capsys):
    workspace.history[90] = [_run(9000, OK)]
    workspace.logs[90] = summary_logs(1)

    code = main(["workspace", "status", "--target", "prod"])
    out = capsys.readouterr().out

    assert code == 1
    assert "kafka_iceberg_ingest_json_lake     SUCCESS" in out  # job 90, the one deployed under the prod root
    assert "kafka_iceberg_ingest_csv_lake      NOT DEPLOYED" in out
    assert [int(r.query["job_id"]) for r in workspace.calls("GET", "/api/2.2/jobs/runs/list")] == [90]
