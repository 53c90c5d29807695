"""Which Parquet columns the Arrow writer dictionary-encodes: those a sample shows it pays for.

Spark's Java writer (parquet-mr) drops a column's dictionary once its first page shows the
dictionary and its indices take more room than the plain values. pyarrow keeps dictionary-encoding a
column until its dictionary outgrows ``write.parquet.dict-size-bytes`` (2 MB), so ids, timestamps
and free text were written as a dictionary as large as their values plus an index per row: on the
benchmark's rows the files were 2-46 % larger and their write took 5-28 % more CPU than with the
dictionaries chosen here (``benchmarks/parquet_dictionaries.py``; benchmarks/fixes.md, stop 70).
Each file's columns are decided up front from an even sample of its rows: a dictionary where at
most half the sampled values are distinct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

SAMPLE = 1024  # rows sampled per file; counting their distinct values takes about 0.1 ms a column


def dictionary_columns(table: pa.Table, sample: int = SAMPLE) -> list[str]:
    """The Parquet column paths of ``table`` worth a dictionary (``pq.ParquetWriter(use_dictionary=...)``).

    A leaf column is worth one when at most half of its sampled non-null values are distinct. Paths
    are spelled as Parquet names them: ``a.b`` in a struct, ``a.list.element``, ``a.key_value.key``.
    """
    import numpy as np
    import pyarrow as pa

    rows = table.num_rows
    if rows > sample:
        table = table.take(pa.array(np.linspace(0, rows - 1, sample).astype(np.int64)))
    out: list[str] = []
    for name in table.column_names:
        for path, values in _leaves(name, table.column(name).combine_chunks()):
            if _pays(values):
                out.append(path)
    return out


def _leaves(path: str, values: pa.Array) -> list[tuple[str, pa.Array]]:
    import pyarrow as pa

    kind = values.type
    if pa.types.is_struct(kind):
        return [
            leaf for i in range(kind.num_fields) for leaf in _leaves(f"{path}.{kind.field(i).name}", values.field(i))
        ]
    if pa.types.is_map(kind):
        return _leaves(f"{path}.key_value.key", values.keys) + _leaves(f"{path}.key_value.value", values.items)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaves(f"{path}.list.element", values.flatten())
    return [(path, values)]


def _pays(values: pa.Array) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ExtensionArray):  # uuid: its 16 bytes
        values = values.storage
    present = len(values) - values.null_count
    if present == 0 or pa.types.is_boolean(values.type):  # nothing sampled; booleans are bit-packed anyway
        return False
    try:
        distinct: int = pc.count_distinct(values, mode="only_valid").as_py()
    except pa.ArrowNotImplementedError:  # a type Arrow cannot count: pyarrow's own choice, a dictionary
        return True
    return bool(distinct * 2 <= present)


def install() -> None:
    """Make pyiceberg's Parquet writer in this process choose its dictionaries with :func:`dictionary_columns`.

    pyiceberg writes through the one Parquet model its ``FileFormatFactory`` holds and passes no
    per-column encoding; the model is replaced once by a subclass that sets ``use_dictionary`` from
    the first table a writer is given (pyiceberg hands each file's rows over in one table).
    """
    from pyiceberg.io.fileformat import FileFormatFactory
    from pyiceberg.io.pyarrow import ParquetFormatModel, ParquetFormatWriter
    from pyiceberg.manifest import FileFormat

    current = FileFormatFactory.get(FileFormat.PARQUET)
    if getattr(current, "chooses_dictionaries", False):
        return
    if type(current) is not ParquetFormatModel:
        raise RuntimeError(f"pyiceberg's Parquet writer is {type(current).__name__}, not the one this module extends")

    class Writer(ParquetFormatWriter):
        def write(self, table: Any) -> None:
            if self._writer is None:
                self._parquet_writer_kwargs["use_dictionary"] = dictionary_columns(table)
            super().write(table)

    class Model(ParquetFormatModel):
        chooses_dictionaries = True

        def create_writer(self, output_file: Any, file_schema: Any, properties: Any) -> ParquetFormatWriter:
            return Writer(output_file, file_schema, properties)

    FileFormatFactory._registry[FileFormat.PARQUET] = Model()
