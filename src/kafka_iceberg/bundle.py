"""Databricks asset bundle hooks (``databricks.yml`` → ``python.mutators``).

:func:`add_runtime_libraries` gives every task that runs a kafka-iceberg entry point the Maven
libraries listed for clusters in ``jars.lock.toml``, so jar versions are written in one place
for laptops and clusters alike.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from databricks.bundles.core import Bundle, job_mutator
from databricks.bundles.jobs import Job, Library, MavenLibrary, Task

from kafka_iceberg.jars import cluster_maven_coordinates

PACKAGE_NAME = "kafka_iceberg"


def _runs_kafka_iceberg(task: Task) -> bool:
    wheel: Any = task.python_wheel_task
    return wheel is not None and getattr(wheel, "package_name", None) == PACKAGE_NAME


def with_runtime_libraries(job: Job) -> Job:
    """A copy of ``job`` whose kafka-iceberg tasks carry the cluster Maven libraries."""
    coordinates = cluster_maven_coordinates()
    # Fields may hold ${var...} references (Variable); those are left exactly as declared.
    tasks: list[Any] = list(job.tasks) if isinstance(job.tasks, list) else []
    out: list[Any] = []
    for task in tasks:
        if isinstance(task, Task) and _runs_kafka_iceberg(task):
            libraries: list[Any] = list(task.libraries) if isinstance(task.libraries, list) else []
            present = {getattr(lib.maven, "coordinates", None) for lib in libraries if isinstance(lib, Library)}
            extra = [Library(maven=MavenLibrary(coordinates=c)) for c in coordinates if c not in present]
            out.append(replace(task, libraries=[*libraries, *extra]))
        else:
            out.append(task)
    return replace(job, tasks=out) if tasks else job


@job_mutator
def add_runtime_libraries(bundle: Bundle, job: Job) -> Job:
    """Bundle mutator: see :func:`with_runtime_libraries`."""
    return with_runtime_libraries(job)
