"""What a run costs besides wall time: CPU seconds, peak memory, and the file layout it left behind.

- CPU: the user+system time of the driver JVM and of every process under it — Spark's Python
  workers, where ``mapInArrow`` and Python UDFs run (``/proc/<pid>/stat``, children included once
  reaped) — plus this Python process's (``time.process_time``). On a shared machine CPU seconds
  move far less with other tenants' load than wall time, so they are reported beside it.
- Memory: peak RSS of the driver JVM and of this Python process, sampled every 100 ms from
  ``/proc/<pid>/status``; the JVM heap's peak (sum of the heap pools' peak usage, reset before
  each run, ``java.lang.management.MemoryPoolMXBean``); and the peak of the memory held by Spark's
  Python daemon and workers together, where the Arrow writer's tasks hold their batches: the sum
  of their proportional set sizes (``/proc/<pid>/smaps_rollup``), so the pages a forked worker
  shares with its daemon count once.
- Layout: data files per commit and average file size, from the table's snapshot summaries and
  ``inspect.files()`` read through pyiceberg (not through the Spark session that wrote them).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def _stat(pid: int | str) -> list[str]:
    """Fields of ``/proc/<pid>/stat`` after the command name (index 0 is field 3, the state)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


@dataclass
class ProcessTree:
    """CPU seconds of a process and every process under it, including those that end meanwhile,
    and the memory the processes under it hold now (:meth:`memory_mb`).

    Spark's Python daemon ignores SIGCHLD, so a worker that ends is reaped by the kernel and its
    CPU time never reaches its parent's ``cutime``: each process is followed by itself, and the
    last value seen of one that ended is kept (a process that starts and ends between two
    :meth:`scan` calls is missed).
    """

    root: int
    seen: dict[tuple[int, str], float] = field(default_factory=dict)  # (pid, start time) → CPU s
    under: list[int] = field(default_factory=list)  # the processes under the root at the last scan

    def __post_init__(self) -> None:
        self.base = self.scan()

    def scan(self) -> float:
        """Look at the tree now; returns the CPU seconds of everything seen so far."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    children.setdefault(int(_stat(entry.name)[1]), []).append(int(entry.name))
                except OSError:  # gone meanwhile
                    continue
        todo, under = [self.root], []
        while todo:
            pid = todo.pop()
            try:
                fields = _stat(pid)
            except OSError:
                continue
            self.seen[(pid, fields[19])] = (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime
            if pid != self.root:
                under.append(pid)
            todo += children.get(pid, [])
        self.under = under
        return sum(self.seen.values())

    def memory_mb(self) -> float:
        """Memory held now by the processes under the root seen at the last :meth:`scan` (PSS, summed)."""
        return self._summed(pss_mb)

    def rss_mb(self) -> float:
        """Their RSS summed: shared pages counted once per process, but read in 0.02 ms where PSS takes 1-1.5."""
        return self._summed(rss_mb)

    def _summed(self, read: Callable[[int], float]) -> float:
        total = 0.0
        for pid in self.under:
            try:
                total += read(pid)
            except OSError:  # ended since the scan
                continue
        return total

    def spent(self) -> float:
        """CPU seconds since this object was made."""
        return self.scan() - self.base


def _proc_mb(path: str, key: str) -> float:
    """The ``key:`` line of a ``/proc`` file giving kB, in MB (0 when the file has no such line)."""
    with open(path) as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_mb(pid: int | str) -> float:
    return _proc_mb(f"/proc/{pid}/status", "VmRSS:")


def pss_mb(pid: int | str) -> float:
    """Proportional set size: each page shared between processes counted once across them."""
    return _proc_mb(f"/proc/{pid}/smaps_rollup", "Pss:")


def _heap_pools(spark: Any) -> list[Any]:
    mf = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    return [p for p in mf.getMemoryPoolMXBeans() if str(p.getType().toString()) == "Heap memory"]


@dataclass
class Usage:
    """CPU and memory of one measured block."""

    wall_seconds: float = 0.0
    jvm_cpu_seconds: float = 0.0
    python_cpu_seconds: float = 0.0
    jvm_peak_rss_mb: float = 0.0
    jvm_peak_heap_mb: float = 0.0
    python_peak_rss_mb: float = 0.0
    python_workers_peak_mb: float = 0.0
    python_workers_start_mb: float = 0.0  # what earlier runs' idle workers held when this one began
    samples: int = 0

    @property
    def cpu_seconds(self) -> float:
        return self.jvm_cpu_seconds + self.python_cpu_seconds

    def as_dict(self) -> dict[str, float]:
        return {
            "wall_seconds": round(self.wall_seconds, 3),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "jvm_cpu_seconds": round(self.jvm_cpu_seconds, 3),
            "python_cpu_seconds": round(self.python_cpu_seconds, 3),
            "jvm_peak_rss_mb": round(self.jvm_peak_rss_mb, 1),
            "jvm_peak_heap_mb": round(self.jvm_peak_heap_mb, 1),
            "python_peak_rss_mb": round(self.python_peak_rss_mb, 1),
            "python_workers_peak_mb": round(self.python_workers_peak_mb, 1),
            "python_workers_start_mb": round(self.python_workers_start_mb, 1),
        }


@dataclass
class Meter:
    """``with Meter(spark) as m: ...`` then ``m.usage``."""

    spark: Any
    interval: float = 0.1
    usage: Usage = field(default_factory=Usage)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _workers_rss_high: float = 0.0

    def __enter__(self) -> Meter:
        self._pid = jvm_pid(self.spark)
        self._pools = _heap_pools(self.spark)
        for pool in self._pools:
            pool.resetPeakUsage()
        self._tree = ProcessTree(self._pid)
        self.usage.python_workers_start_mb = self._tree.memory_mb()
        self._py0 = time.process_time()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        ticks = 0
        while not self._stop.is_set():
            scanned = ticks % 5 == 0  # often enough to see a Python worker before it ends, cheap enough
            if scanned:
                self._tree.scan()
            self._take(workers_pss=scanned)
            ticks += 1
            self._stop.wait(self.interval)

    def _take(self, workers_pss: bool = True) -> None:
        """One sample. The workers' PSS costs 1-1.5 ms a process, paid in the measured Python's CPU:
        read at each tree scan, and at a tick whose summed RSS is the highest yet (memory growing)."""
        u = self.usage
        u.jvm_peak_rss_mb = max(u.jvm_peak_rss_mb, rss_mb(self._pid))
        u.python_peak_rss_mb = max(u.python_peak_rss_mb, rss_mb("self"))
        workers_rss = self._tree.rss_mb()
        if workers_pss or workers_rss > self._workers_rss_high:
            self._workers_rss_high = max(self._workers_rss_high, workers_rss)
            u.python_workers_peak_mb = max(u.python_workers_peak_mb, self._tree.memory_mb())
        u.samples += 1

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._take()
        u = self.usage
        u.wall_seconds = time.monotonic() - self._t0
        u.jvm_cpu_seconds = self._tree.spent()
        u.python_cpu_seconds = time.process_time() - self._py0
        u.jvm_peak_heap_mb = sum(int(p.getPeakUsage().getUsed()) for p in self._pools) / 2**20


def table_layout(catalog: Any, identifier: str) -> dict[str, Any]:
    """Commits, data files per commit and average data file size of a table (pyiceberg)."""
    table = catalog.load_table(identifier)
    per_commit, deletes = [], 0
    for snap in table.snapshots():
        summary = snap.summary
        extra = summary.additional_properties if summary is not None else {}
        added = int(extra.get("added-data-files", 0))
        records = int(extra.get("added-records", 0))
        if added or records:
            per_commit.append(added)
            deletes += int(extra.get("added-delete-files", 0))
    import pyarrow.compute as pc

    files = table.inspect.files()
    data = files.filter(pc.equal(files.column("content"), 0)) if files.num_rows else files
    sizes = data.column("file_size_in_bytes").to_pylist() if data.num_rows else []
    return {
        "commits_with_data": len(per_commit),
        "files_per_commit": round(sum(per_commit) / len(per_commit), 2) if per_commit else 0.0,
        "delete_files_added": deletes,
        "live_data_files": len(sizes),
        "avg_file_mb": round(sum(sizes) / len(sizes) / 2**20, 3) if sizes else 0.0,
        "table_mb": round(sum(sizes) / 2**20, 2),
    }
