"""Python functions run in Spark's tasks (``mapInArrow``), their UDF made once and not at every batch.

``DataFrame.mapInArrow`` pickles the function with its arguments (a table's metadata, the batch's
labels) and builds the JVM's Python function from them, about 40 py4j calls and 10 ms of every
batch's plan. The same function with equal arguments gets the same UDF here: only the frame's
columns are bound per batch.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_KEPT = 16  # UDFs kept: a few per table (its writer's task, its decoder's)
_udfs: OrderedDict[Hashable, tuple[Any, Any]] = OrderedDict()  # key → (SparkContext, UDF)
_lock = threading.Lock()
_lean = [True]  # False once this Spark's DataFrame lacks the method, or its signature, the lean path calls


def _token(value: Any) -> Hashable:
    """``value`` as part of a cache key: itself when hashable, else its identity (the entry keeps it alive)."""
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return ("value", value)


def _key(task: Callable[..., Any], schema: StructType | str) -> Hashable | None:
    if not isinstance(task, functools.partial):
        return None
    keywords = tuple(sorted((k, _token(v)) for k, v in task.keywords.items()))
    return (task.func, tuple(_token(a) for a in task.args), keywords, _token(schema))


def map_in_arrow(frame: DataFrame, task: Callable[..., Any], schema: StructType | str) -> DataFrame:
    """``frame.mapInArrow(task, schema)``, reusing the UDF of an equal ``task`` (a ``functools.partial``)."""
    from pyspark.rdd import PythonEvalType
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.functions import pandas_udf

    key = _key(task, schema)
    if key is None or not _lean[0] or not hasattr(frame, "_jdf"):  # Spark Connect has no py4j handles
        return frame.mapInArrow(task, schema)
    context = frame.sparkSession.sparkContext
    with _lock:
        entry = _udfs.get(key)
        if entry is None or entry[0] is not context:
            udf = pandas_udf(task, returnType=schema, functionType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)  # type: ignore[call-overload]
            # the entry keeps ``task`` (through the UDF) and so every argument keyed by identity alive
            entry = _udfs[key] = (context, udf)
            while len(_udfs) > _KEPT:
                _udfs.popitem(last=False)
        else:
            _udfs.move_to_end(key)
    column = entry[1](*[frame[c] for c in frame.columns])
    try:
        jdf = frame._jdf.pythonMapInArrow(column._jc.expr(), False)  # what Spark 3.5's DataFrame.mapInArrow calls
    except Exception as exc:  # another signature (older and newer Sparks): their public method from now on
        if "pythonMapInArrow" not in str(exc):
            raise
        _lean[0] = False
        return frame.mapInArrow(task, schema)
    return DataFrame(jdf, frame.sparkSession)


def cores(spark: SparkSession) -> int | None:
    """How many tasks the session runs at once: ``local[N]``'s N, else Spark's default parallelism.

    A local session's default parallelism is set above its cores (session.LOCAL_DEFAULTS) so that a
    scan splits its files finer than the cores; a cluster's is its executors' cores. None without a
    SparkContext (Spark Connect).
    """
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect
        return None
    master = str(context.master)
    if master == "local":
        return 1
    if master.startswith("local["):  # local[N], local[*], local[N,F] (F: task retries)
        threads = master[len("local[") :].partition(",")[0].rstrip("]").strip()
        return (os.cpu_count() or 1) if threads == "*" else max(1, int(threads))
    return max(1, int(context.defaultParallelism))
