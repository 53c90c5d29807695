"""The Arrow writer's Parquet dictionaries: chosen per column (``write/dictionaries.py``) against pyarrow's default.

For each dataset the bench's messages (no bad records) are parsed into the rows a table holds —
the Kafka columns and the payload's, flatten's nested values as JSON text — and one file of them
is written by pyiceberg's Parquet writer twice, alternately: with pyarrow's default (a dictionary
for every column, until it outgrows 2 MB) as the in-run baseline, and with the dictionaries the
Arrow writer chooses. Reports the best CPU time of each over ``--repeat`` rounds, their ratio and
the files' sizes; writes ``benchmarks/results/dictionaries.json``. No Spark, no stack: the files go
to a temporary directory.

    python benchmarks/parquet_dictionaries.py [--rows 50000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import datagen
from benchmarks.baselines import HEAD, pyarrow_parse

DATASETS = (("flatten", "small"), ("flatten", "large"), ("csv", "large"), ("text", "large"), ("avro", "large"))


def table_rows(fmt: str, size: str, rows: int) -> Any:
    """The rows a table of ``fmt`` holds for ``rows`` clean bench messages (flatten's nested values as text)."""
    import pyarrow as pa

    ds = datagen.Dataset(fmt, size, rows, rows, bad_share=0.0)
    kafka = datagen.kafka_table(ds, list(datagen.messages(ds)))
    payload = pyarrow_parse(fmt, kafka)
    if fmt == "flatten":  # the framework keeps nested values as the JSON text Jackson prints
        for name in ("tags", "ctx"):
            texts = [json.dumps(v, separators=(",", ":")) for v in payload[name].to_pylist()]
            payload[name] = pa.array(texts, pa.string())
    return pa.table({**{c: kafka.column(c) for c in HEAD}, **payload})


def as_table(rows: Any, directory: str) -> tuple[Any, Any]:
    """An unpartitioned zstd table's metadata for ``rows`` (under ``directory``), and the rows in its schema."""
    from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    schema = assign_fresh_schema_ids(visit_pyarrow(rows.schema, _ConvertToIcebergWithoutIDs()))
    props = {"write.parquet.compression-codec": "zstd"}
    metadata = new_table_metadata(
        schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, f"file://{directory}", props
    )
    return metadata, rows.cast(metadata.schema().as_arrow())


def write_cpu(metadata: Any, data: Any, model: Any) -> tuple[float, int]:
    """CPU seconds of pyiceberg writing ``data`` as the table's data files with Parquet ``model``; their bytes."""
    import uuid

    from pyiceberg.io.fileformat import FileFormatFactory
    from pyiceberg.io.pyarrow import PyArrowFileIO, _dataframe_to_data_files
    from pyiceberg.manifest import FileFormat

    FileFormatFactory._registry[FileFormat.PARQUET] = model
    start = time.process_time()
    files = list(_dataframe_to_data_files(metadata, data, PyArrowFileIO(), write_uuid=uuid.uuid4()))
    return time.process_time() - start, sum(f.file_size_in_bytes for f in files)


def main() -> None:
    import pyarrow as pa
    from pyiceberg.io.fileformat import FileFormatFactory
    from pyiceberg.io.pyarrow import ParquetFormatModel  # importing it registers pyiceberg's model
    from pyiceberg.manifest import FileFormat

    from kafka_iceberg.write import dictionaries

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "dictionaries.json")
    args = parser.parse_args()
    pa.set_cpu_count(1)  # one task's core
    pa.set_io_thread_count(1)
    before = FileFormatFactory.get(FileFormat.PARQUET)  # this process may have installed the choice already
    default = ParquetFormatModel()  # pyiceberg's own: pyarrow's default dictionaries
    dictionaries.install()
    chosen = FileFormatFactory.get(FileFormat.PARQUET)
    assert getattr(chosen, "chooses_dictionaries", False)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="kafka-iceberg-dicts-") as directory:
            for fmt, size in DATASETS:
                rows = table_rows(fmt, size, args.rows)
                metadata, data = as_table(rows, f"{directory}/{fmt}_{size}")
                times: dict[str, list[float]] = {"default": [], "chosen": []}
                sizes: dict[str, int] = {}
                for _ in range(args.repeat):
                    for label, model in (("default", default), ("chosen", chosen)):
                        seconds, size_bytes = write_cpu(metadata, data, model)
                        times[label].append(seconds)
                        sizes[label] = size_bytes
                best = {label: min(values) for label, values in times.items()}
                result = {
                    "dataset": f"{fmt}_{size}",
                    "rows": rows.num_rows,
                    "cpu_s": best,
                    "all_cpu_s": times,
                    "bytes": sizes,
                    "cpu_ratio": best["chosen"] / best["default"],
                    "size_ratio": sizes["chosen"] / sizes["default"],
                    "dictionary_columns": dictionaries.dictionary_columns(rows),
                }
                results.append(result)
                cpu_ms = {label: f"{seconds * 1000:6.1f}" for label, seconds in best.items()}
                mb = {label: f"{size_bytes / 1e6:6.2f}" for label, size_bytes in sizes.items()}
                print(
                    f"{result['dataset']:14s} CPU {cpu_ms['default']} -> {cpu_ms['chosen']} ms "
                    f"(x{result['cpu_ratio']:.2f})  size {mb['default']} -> {mb['chosen']} MB "
                    f"(x{result['size_ratio']:.2f})",
                    flush=True,
                )
    finally:
        FileFormatFactory._registry[FileFormat.PARQUET] = before
    args.out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "load_average": os.getloadavg()}
    args.out.write_text(json.dumps({"machine": machine, "repeat": args.repeat, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
