"""Free ports for the local stack's servers: a block handed out is not handed out again while its
server starts, in this process or another (two test workers start their stacks at the same moment).

The ranges sit below the stacks' own (12000-22000), where nothing of the suite listens."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafka_iceberg.local import processes


@pytest.fixture
def reservations(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "ports.json"
    monkeypatch.setattr(processes, "_reservations", lambda: path)
    return path


def test_a_block_handed_out_is_not_handed_out_again_until_its_reservation_ends(reservations):
    # One block fits this range: the second call finds it promised, though nothing listens on it yet.
    assert processes.free_port_block(3, low=11000, high=11004) == [11000, 11001, 11002]
    with pytest.raises(RuntimeError, match="no block of 3 free loopback ports between 11000 and 11004"):
        processes.free_port_block(3, low=11000, high=11004)
    assert set(json.loads(reservations.read_text())) == {"11000", "11001", "11002"}

    # The server had its time to bind: the reservation ended.
    reservations.write_text(json.dumps(dict.fromkeys(["11000", "11001", "11002"], 0)))
    assert processes.free_port_block(3, low=11000, high=11004) == [11000, 11001, 11002]


def test_blocks_chosen_at_once_by_several_processes_never_overlap(reservations):
    # Four processes ask together for blocks of 3 among 19 ports: chosen at random without the
    # reservation, two of them would overlap more often than not.
    script = textwrap.dedent(f"""
        import json, pathlib, sys
        from kafka_iceberg.local import processes
        processes._reservations = lambda: pathlib.Path({str(reservations)!r})
        sys.stdin.readline()  # wait for the go, so that the four choose at the same moment
        print(json.dumps(processes.free_port_block(3, low=11100, high=11122)))
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    blocks = [json.loads(proc.communicate(timeout=60)[0]) for proc in procs]
    ports = [p for block in blocks for p in block]
    assert len(ports) == len(set(ports)) == 12, blocks
    assert all(block == list(range(block[0], block[0] + 3)) for block in blocks), blocks


def test_the_plus_ports_are_reserved_too(reservations):
    processes.free_port_block(2, also_plus=100, low=11200, high=11203)
    assert set(json.loads(reservations.read_text())) == {"11200", "11201", "11300", "11301"}


def test_a_stopped_servers_ports_are_held_again_until_it_restarts(reservations, monkeypatch):
    monkeypatch.setattr(processes, "RESERVED_SECONDS", -1.0)
    processes.free_port_block(3, low=11300, high=11304)
    assert processes.reserved_ports() == set()  # its server had its time to bind
    monkeypatch.setattr(processes, "RESERVED_SECONDS", 300.0)
    processes.reserve_ports([11300, 11301, 11302])  # ... and was stopped, to start again on them
    assert processes.reserved_ports() == {11300, 11301, 11302}
    with pytest.raises(RuntimeError, match="no block of 3"):
        processes.free_port_block(3, low=11300, high=11304)
