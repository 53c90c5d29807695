"""Spark's Python worker daemon for local sessions, importing pyspark from where it is installed.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip``, the py4j zip and the spark-core jar in front of
its Python workers' ``sys.path``. With a pip-installed pyspark, ``SPARK_HOME`` is that install and
the zips hold the same code without bytecode, which costs twice: modules imported from a zip are
compiled from source in every worker process, and before each task the worker calls
``importlib.invalidate_caches()``, which re-reads the directory of every zip and jar on the path
(~0.1 s for spark-core's alone). This daemon drops those entries when the pyspark that owns them
is importable without them, then runs Spark's own daemon unchanged. ``session.get_spark`` names
it (``spark.python.daemon.module``) for the local sessions it builds; clusters keep their own.

It also imports, once, what the project's Python tasks import (:data:`PRELOADED`) before Spark's
daemon forks its workers from it, so that each worker starts with them. Spark stops a worker that
has been idle for a minute, and the next task starts a new one: each new worker imported pyarrow's
readers and Parquet, pyiceberg and the Arrow decoder and writer again (about 1.3 s of CPU), in the
first batch after any pause.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from importlib.machinery import PathFinder
from pathlib import Path


def spark_archives(path: Sequence[str]) -> list[str]:
    """The entries of ``path`` Spark added for a pyspark that is also installed as a package.

    Empty when pyspark cannot be imported from the rest of ``path``, or is another install than
    the one whose ``python/lib`` holds the zips: then the zips are the only pyspark there is.
    """
    zips = [p for p in path if _is_spark_zip(p)]
    rest = [p for p in path if p not in zips and not _is_spark_jar(p)]
    found = PathFinder.find_spec("pyspark", rest)
    if not zips or found is None or not found.submodule_search_locations:
        return []
    home = Path(next(iter(found.submodule_search_locations))).resolve()
    if any(Path(z).resolve().parents[2] != home for z in zips):  # <home>/python/lib/<zip>
        return []
    return [p for p in path if p not in rest]


def _is_spark_zip(entry: str) -> bool:
    name = os.path.basename(entry)
    in_lib = os.path.basename(os.path.dirname(entry)) == "lib"
    return in_lib and (name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith("-src.zip")))


def _is_spark_jar(entry: str) -> bool:
    return os.path.basename(os.path.dirname(entry)) == "jars" and os.path.basename(entry).startswith("spark-core_")


# The modules the Arrow decoder's and the Arrow writer's tasks import (decode/arrow.py,
# write/certified.py, write/arrow_files.py), with what they import inside functions.
PRELOADED = (
    "numpy",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.csv",
    "pyarrow.json",
    "pyarrow.parquet",
    "pyiceberg.io.pyarrow",
    "pyiceberg.table.metadata",
    "kafka_iceberg.write.certified",
)


def preload(names: Sequence[str] = PRELOADED) -> list[str]:
    """Import ``names``; returns those imported. One that cannot be is left to the task that needs it."""
    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # the task that imports it reports it, as without this daemon
            continue
        loaded.append(name)
    return loaded


def main() -> None:
    """Drop Spark's archives from ``sys.path`` (and their cached importers), preload, then run Spark's daemon."""
    archives = spark_archives(sys.path)
    for entry in archives:
        sys.path.remove(entry)
    # So do importers of directories inside them, and namespace packages found there: looking for
    # Jython's ``org`` (``copy`` and ``pickle`` do) makes the spark-core jar's ``org/`` a package,
    # and each task would re-read the jar again.
    inside = tuple(a + os.sep for a in archives)
    for cached in [k for k in sys.path_importer_cache if k in archives or k.startswith(inside)]:
        del sys.path_importer_cache[cached]
    for name, module in list(sys.modules.items()):
        locations = getattr(getattr(module, "__spec__", None), "submodule_search_locations", None)
        if locations is not None and list(locations) and all(str(p).startswith(inside) for p in locations):
            del sys.modules[name]
    preload()
    from pyspark import daemon

    daemon.manager()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
