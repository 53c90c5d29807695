"""How the suite itself is run: `make test` hands whole files to two pytest-xdist workers, the files
with a ``slow`` test first (tests/conftest.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from itertools import groupby

from tests.support.project import REPO

SLOW = re.compile(r"^(@pytest\.mark\.slow|pytestmark = .*pytest\.mark\.slow)", re.MULTILINE)


def test_the_files_with_a_slow_test_are_handed_out_first_each_file_in_one_piece():
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    ids = [line for line in collected.splitlines() if "::" in line]
    files = [name for name, _ in groupby(i.split("::")[0] for i in ids)]
    assert len(files) == len(set(files)), "a file's tests are not together: its module fixtures would run twice"
    # Read from the sources, not from the markers the hook sorts by.
    slow = {str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py") if SLOW.search(p.read_text())}
    assert {"tests/e2e/test_exactly_once.py", "tests/bundle/test_deployed_jobs.py"} <= slow
    assert set(files[: len(slow)]) == slow, files[: len(slow) + 2]


def test_make_test_hands_out_whole_files_in_that_order():
    recipe = (REPO / "Makefile").read_text()
    # pytest-xdist hands out the files with the most tests first unless told not to: the dense-crash
    # runs (3 tests, 7 minutes) went out among the last files.
    assert re.search(r"^TEST_DIST +:= -n \$\(TEST_WORKERS\) --dist loadfile --no-loadscope-reorder$", recipe, re.M)
    assert re.search(r"^test: .*\n\t\$\(BIN\)/pytest \$\(TEST_DIST\)$", recipe, re.M)
