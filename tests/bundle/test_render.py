"""The bundle renderer of the deployed-job harness (tests/support/bundle.py) on small bundles."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support.bundle import Bundle, BundleError, resolve_secret_references

BUNDLE_YML = """
bundle: {name: demo}
include: [resources/*.yml]
variables:
  servers: {description: brokers}
  workers: {description: workers, default: 1}
  cluster:
    description: the job cluster
    type: complex
    default:
      num_workers: ${var.workers}
      spark_env_vars:
        SERVERS: ${var.servers}
        PASSWORD: "{{secrets/scope/password}}"
targets:
  a:
    variables: {servers: "a:9092"}
  b: {}
"""

JOB_YML = """
resources:
  jobs:
    ingest:
      name: ${bundle.name}_ingest
      job_clusters: [{job_cluster_key: main, new_cluster: "${var.cluster}"}]
      tasks:
        - task_key: run
          job_cluster_key: main
          python_wheel_task:
            package_name: demo
            entry_point: run
            parameters: [--file, "${workspace.file_path}/p.yml", --env, "${bundle.target}"]
targets:
  a:
    resources:
      jobs:
        ingest:
          tasks: [{task_key: run, max_retries: 3}]
"""


def _bundle(tmp_path: Path) -> Bundle:
    (tmp_path / "resources").mkdir()
    (tmp_path / "databricks.yml").write_text(textwrap.dedent(BUNDLE_YML))
    (tmp_path / "resources" / "ingest.job.yml").write_text(textwrap.dedent(JOB_YML))
    return Bundle(tmp_path)


def test_a_task_comes_out_with_its_cluster_variables_and_parameters_resolved(tmp_path):
    [task] = _bundle(tmp_path).render("a").wheel_tasks()
    assert (task.job, task.task, task.entry_point) == ("ingest", "run", "run")
    assert task.parameters == ("--file", f"{tmp_path}/p.yml", "--env", "a")
    assert task.cluster["num_workers"] == 1  # a number stays a number through a complex variable
    assert task.spark_env_vars == {"SERVERS": "a:9092", "PASSWORD": "{{secrets/scope/password}}"}


def test_target_overrides_merge_into_tasks_by_key(tmp_path):
    job = _bundle(tmp_path).render("a").jobs["ingest"]
    assert job["name"] == "demo_ingest"
    assert job["tasks"][0]["max_retries"] == 3 and job["tasks"][0]["python_wheel_task"]["entry_point"] == "run"


def test_a_target_leaving_a_variable_unset_does_not_render_unless_given_as_var(tmp_path):
    bundle = _bundle(tmp_path)
    with pytest.raises(BundleError, match=r"no value assigned to required variable.*servers"):
        bundle.render("b")
    [task] = bundle.render("b", {"servers": "b:9092"}).wheel_tasks()
    assert task.spark_env_vars["SERVERS"] == "b:9092"


def test_secret_references_resolve_from_the_scope_and_report_what_is_missing():
    env_vars = {"A": "{{secrets/s/a}}", "B": "{{secrets/s/b}}", "C": "plain"}
    lookup = resolve_secret_references(env_vars, lambda scope, key: "x" if key == "a" else None)
    assert lookup.env == {"A": "x", "C": "plain"}
    assert lookup.missing == ["s/b"]
