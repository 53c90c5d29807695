"""A Python function run in Spark's tasks gets its UDF made once for equal arguments (kafka_iceberg.tasks)."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_iceberg import tasks


def _plus(batches: Iterator[Any], *, n: int, names: Any = None) -> Iterator[Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        yield pa.RecordBatch.from_arrays([pc.add(batch.column(0), n)], names=["id"])


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many UDFs the calls made (each one pickles its function and builds the JVM's)."""
    from pyspark.sql.pandas import functions

    made: list[int] = []
    real = functions.pandas_udf

    def counting(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(functions, "pandas_udf", counting)
    monkeypatch.setattr(tasks, "_udfs", type(tasks._udfs)())
    return made


def test_equal_arguments_reuse_the_udf_and_other_arguments_make_their_own(spark: Any, made: list[int]) -> None:
    frame = spark.range(3)

    def run(task: Any) -> list[int]:
        return sorted(r["id"] for r in tasks.map_in_arrow(frame, task, "id long").collect())

    assert run(functools.partial(_plus, n=1)) == [1, 2, 3]
    assert run(functools.partial(_plus, n=1)) == [1, 2, 3]  # a new partial, equal arguments: the same UDF
    assert len(made) == 1
    assert run(functools.partial(_plus, n=10)) == [10, 11, 12]  # another argument: its own UDF, its own result
    assert len(made) == 2
    # An argument that cannot be hashed is told apart by identity: an equal copy makes a UDF of its own.
    names = {"a": 1}
    run(functools.partial(_plus, n=1, names=names))
    run(functools.partial(_plus, n=1, names=names))
    run(functools.partial(_plus, n=1, names=dict(names)))
    assert len(made) == 4


def test_a_plain_function_is_mapped_as_mapinarrow_maps_it(spark: Any, made: list[int]) -> None:
    frame = spark.range(2)

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        return _plus(batches, n=5)

    assert sorted(r["id"] for r in tasks.map_in_arrow(frame, task, "id long").collect()) == [5, 6]
    assert sorted(r["id"] for r in tasks.map_in_arrow(frame, task, "id long").collect()) == [5, 6]
    assert len(made) == 2  # not a partial: no key, a UDF per call


def test_a_spark_whose_method_has_another_signature_takes_the_public_mapinarrow(
    spark: Any, made: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark versions before and after 3.5 spell the JVM method differently: the first call finds out
    and every later one goes straight to ``DataFrame.mapInArrow`` (which calls it their way)."""
    from pyspark.sql import DataFrame

    monkeypatch.setattr(tasks, "_lean", [True])

    class OtherSignature:
        """A frame's JVM handle whose method refuses the arguments Spark 3.5's take."""

        def __init__(self, jdf: Any) -> None:
            self._jdf = jdf

        def pythonMapInArrow(self, *args: Any) -> Any:
            raise RuntimeError("Method pythonMapInArrow([class Expression, class Boolean]) does not exist")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._jdf, name)

    frame = spark.range(2)
    other = DataFrame(OtherSignature(frame._jdf), frame.sparkSession)  # type: ignore[arg-type]
    public: list[int] = []
    real = DataFrame.mapInArrow  # stands for that Spark's own: here, on the real handle
    monkeypatch.setattr(DataFrame, "mapInArrow", lambda self, *a: public.append(1) or real(frame, *a))
    task = functools.partial(_plus, n=5)
    assert sorted(r["id"] for r in tasks.map_in_arrow(other, task, "id long").collect()) == [5, 6]
    assert tasks._lean == [False] and len(public) == 1
    assert sorted(r["id"] for r in tasks.map_in_arrow(frame, task, "id long").collect()) == [5, 6]
    assert len(public) == 2  # no lean attempt again


def test_cores_are_local_masters_threads_or_the_clusters_default_parallelism():
    from types import SimpleNamespace

    def session(master: str, parallelism: int = 16) -> Any:
        return SimpleNamespace(sparkContext=SimpleNamespace(master=master, defaultParallelism=parallelism))

    assert [tasks.cores(session(m)) for m in ("local", "local[2]", "local[3,4]", "local[ 5 ]")] == [1, 2, 3, 5]
    assert tasks.cores(session("local[*]")) == (os.cpu_count() or 1)
    assert tasks.cores(session("spark://h:7077", 24)) == 24 and tasks.cores(session("local-cluster[2,1,1024]", 2)) == 2
    assert tasks.cores(session("yarn", 0)) == 1

    class Connect:  # Spark Connect's session has no SparkContext
        @property
        def sparkContext(self) -> Any:
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED]")

    assert tasks.cores(Connect()) is None
