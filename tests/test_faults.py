"""The test-only crash hook: parsing, and that an unset or zero-probability point does nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafka_iceberg import faults


def test_points_probabilities_and_seeds_are_parsed():
    plan = faults._parse("publish:0.5:7, committed:1")
    assert set(plan) == {"publish", "committed"}
    assert plan["publish"][0] == 0.5 and plan["committed"][0] == 1.0


def test_an_unknown_point_is_refused():
    with pytest.raises(ValueError, match="unknown point 'publsh'"):
        faults._parse("publsh:1")


def test_unset_or_zero_probability_never_crashes(monkeypatch):
    monkeypatch.delenv(faults.ENV, raising=False)
    faults.reached("publish")
    monkeypatch.setenv(faults.ENV, "publish:0")
    for _ in range(100):
        faults.reached("publish")


def test_a_point_with_probability_one_kills_the_process():
    code = "from kafka_iceberg import faults; faults.reached('committed'); print('survived')"
    done = subprocess.run([sys.executable, "-c", code], env={"KAFKA_ICEBERG_FAULT": "committed:1", "PYTHONPATH": "src"},
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip
    assert done.returncode == -9 and "survived" not in done.stdout
