"""``make chaos SEEDS=N [READER=spark|direct|both] [RECORDS=200000] [WRITER=auto|spark|arrow]``: the crash test of
``test_exactly_once.py`` for many seeds, one pytest session per seed and reader, full size by
default; prints each seed's outcome as it finishes and a summary, exits 1 if any seed failed."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make chaos")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--reader", choices=("spark", "direct", "both"), default="both")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--writer", choices=("auto", "spark", "arrow"), default="auto", help="the table's write.engine")
    parser.add_argument("--first-seed", type=int, default=None, help="seeds first, first+1, ... (default: random)")
    parser.add_argument("--log-dir", type=Path, default=REPO / ".chaos")
    args = parser.parse_args(argv)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    readers = ("spark", "direct") if args.reader == "both" else (args.reader,)
    first = args.first_seed if args.first_seed is not None else random.randrange(1 << 30)
    outcomes: dict[str, list[tuple[int, bool]]] = {r: [] for r in readers}
    for n in range(args.seeds):
        seed = first + n
        for reader in readers:
            label = reader if args.writer == "auto" else f"{reader}-{args.writer}-writer"
            log = args.log_dir / f"seed-{seed}-{label}.log"
            # A SIGKILLed driver never removes its scratch (shuffle blocks, spark-* dirs): each seed gets its own
            # directory (pytest's tmp_path included), removed once it passed, or a long run fills the disk.
            scratch = tempfile.mkdtemp(prefix=f"chaos-{seed}-")
            env = {
                **os.environ,
                "KAFKA_ICEBERG_CHAOS_SEED": str(seed),
                "KAFKA_ICEBERG_CHAOS_RECORDS": str(args.records),
                "KAFKA_ICEBERG_CHAOS_READERS": reader,
                "KAFKA_ICEBERG_CHAOS_WRITER": args.writer,
                "KAFKA_ICEBERG_CHAOS_KILLS": os.environ.get("KAFKA_ICEBERG_CHAOS_KILLS", "8"),  # CI runs fewer (KILLS)
                "SPARK_LOCAL_DIRS": scratch,
                "TMPDIR": scratch,
            }
            started = time.monotonic()
            with log.open("w") as out:
                code = subprocess.call(
                    [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--timeout=7200",
                     f"tests/e2e/test_exactly_once.py::test_crashes_neither_lose_nor_duplicate[{reader}]"],
                    cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            if code == 0:
                shutil.rmtree(scratch, ignore_errors=True)
            outcomes[reader].append((seed, code == 0))
            kills = next((line for line in log.read_text().splitlines() if line.startswith("chaos ")), "")
            verdict = "passed" if code == 0 else f"FAILED (log {log}, files {scratch})"
            print(f"seed {seed} {label}: {verdict} in {time.monotonic() - started:.0f}s  {kills}", flush=True)
    for reader, results in outcomes.items():
        passed = sum(ok for _, ok in results)
        failed = [seed for seed, ok in results if not ok]
        print(f"{reader}: {passed}/{len(results)} seeds passed" + (f"; failed: {failed}" if failed else ""))
    return 0 if all(ok for results in outcomes.values() for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main())
