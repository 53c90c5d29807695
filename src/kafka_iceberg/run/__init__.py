"""The run: prepare a pipeline in an environment, plan it, run it batch by batch.

The order of one batch's steps is the exactly-once guarantee; it lives in :mod:`.batch`. The
other modules follow a run from the command line down: :mod:`.prepared` (validate, select the
tables in :mod:`.jobs`, resolve once in :mod:`.settings`), :mod:`.planning` (what would change;
create the tables), :mod:`.loop` (readers, outages, signals), :mod:`.streaming` and
:mod:`.direct_loop` (how each reader hands batches over), :mod:`.observers`.
"""

from __future__ import annotations

from kafka_iceberg.run.jobs import TableJob
from kafka_iceberg.run.loop import run, stop_on_signals
from kafka_iceberg.run.observers import Observers, observers_for
from kafka_iceberg.run.planning import ensure_tables, maintenance_targets, plan
from kafka_iceberg.run.prepared import Prepared, catalog_settings, open_session, prepare
from kafka_iceberg.run.settings import Settings

__all__ = [
    "Observers",
    "Prepared",
    "Settings",
    "TableJob",
    "catalog_settings",
    "ensure_tables",
    "maintenance_targets",
    "observers_for",
    "open_session",
    "plan",
    "prepare",
    "run",
    "stop_on_signals",
]
