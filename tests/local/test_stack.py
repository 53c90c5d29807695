"""The local stack starts on loopback, answers, is idempotent, and never outlives its owner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kafka_iceberg.local import processes
from kafka_iceberg.local.stack import GRPC_OFFSET, LocalStack

pytestmark = pytest.mark.integration


def _listening_addresses(pid: int) -> set[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if f"pid={pid}," in line}


def test_status_json_has_the_documented_shape(stack, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "kafka_iceberg.cli.main", "local", "status", "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "KAFKA_ICEBERG_RUN_DIR": stack.run_dir},
    )
    status = json.loads(out.stdout)
    assert status["running"] is True
    assert status["kafka"]["bootstrap"] == stack.kafka_bootstrap
    assert status["kafka"]["sasl_bootstrap"] == stack.kafka_sasl_bootstrap
    assert status["kafka"]["sasl_mechanism"] == "SCRAM-SHA-512"
    assert set(status["kafka"]) == {"bootstrap", "sasl_bootstrap", "sasl_mechanism", "sasl_username", "sasl_password"}
    assert status["s3"]["endpoint"].startswith("http://127.0.0.1:")
    assert set(status["s3"]) == {"endpoint", "region", "access_key_id", "secret_access_key", "bucket"}
    assert status["catalog"] == {"type": "rest", "uri": stack.catalog_uri, "warehouse": "s3://warehouse"}
    assert status["run_dir"] == stack.run_dir
    assert status["health"] == {"seaweedfs": True, "kafka": True, "registry": True}
    assert status["schema_registry"] == {"url": stack.registry_url}


def test_the_sasl_listener_takes_the_scram_user_and_refuses_a_wrong_password(stack):
    from confluent_kafka.admin import AdminClient

    def sasl(password: str) -> dict[str, str]:
        return {
            "bootstrap.servers": stack.kafka_sasl_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": stack.kafka_sasl_username,
            "sasl.password": password,
            "log_level": "0",
        }

    assert AdminClient(sasl(stack.kafka_sasl_password)).list_topics(timeout=10).brokers
    errors: list[object] = []
    refused = AdminClient({**sasl("not-the-password"), "error_cb": errors.append})
    with pytest.raises(Exception, match="transport"):
        refused.list_topics(timeout=5)
    refused.poll(1)  # serve the error callbacks
    assert any("Authentication failed" in str(e) for e in errors), errors  # refused, not unreachable


def test_every_server_binds_loopback_only(stack):
    for svc in stack.services.values():
        addresses = _listening_addresses(svc.pid)
        assert addresses, f"{svc.name} listens nowhere"
        assert addresses == {"127.0.0.1"}, f"{svc.name} listens on {addresses}"


def test_up_is_idempotent_and_down_stops_by_pid(tmp_path):
    stack = LocalStack(tmp_path, services=("kafka",))
    first = stack.up(owned=True)
    second = stack.up(owned=True)
    assert second.services["kafka"].pid == first.services["kafka"].pid
    stack.down()
    assert not processes.is_ours(first.services["kafka"].pid, first.services["kafka"].executable, "kafka.Kafka")
    assert stack.status() == {"running": False, "run_dir": str(tmp_path)}


def test_a_cluster_id_starting_with_a_dash_formats_and_starts(tmp_path, monkeypatch):
    # Kafka's ids are URL-safe base64: 1 in 64 starts with "-", which once failed CI's stack start.
    import base64

    from kafka_iceberg.local import stack as stack_module

    dashed = base64.urlsafe_b64encode(bytes([0xF8]) + os.urandom(15)).decode().rstrip("=")
    assert dashed.startswith("-")
    monkeypatch.setattr(stack_module, "_cluster_id", lambda: dashed)
    stack = LocalStack(tmp_path, services=("kafka",))
    try:
        state = stack.up(owned=True)
        meta = (tmp_path / "kafka" / "data" / "meta.properties").read_text()
        assert f"cluster.id={dashed}" in meta
        assert stack_module._kafka_ok(state.kafka_bootstrap)
    finally:
        stack.down()


def test_the_stacks_secrets_stay_out_of_its_repr(stack):
    shown = repr(stack)
    assert stack.kafka_sasl_password and stack.kafka_sasl_password not in shown
    assert stack.s3_secret_access_key is None or stack.s3_secret_access_key not in shown


def test_up_replaces_a_half_dead_stack(tmp_path):
    stack = LocalStack(tmp_path, services=("kafka",))
    first = stack.up(owned=True)
    os.kill(first.services["kafka"].pid, signal.SIGKILL)
    kafka = first.services["kafka"]
    processes.wait_until(lambda: not processes.is_ours(kafka.pid, kafka.executable, kafka.marker), timeout=5)
    second = stack.up(owned=True)
    assert second.services["kafka"].pid != first.services["kafka"].pid
    assert stack.status()["running"] is True
    stack.down()


_OWNER = """
import json, sys
from pathlib import Path
from kafka_iceberg.local.stack import LocalStack
state = LocalStack(Path(sys.argv[1])).up(owned=True)
print(json.dumps({n: [s.pid, s.executable, s.marker] for n, s in state.services.items()}), flush=True)
sys.stdin.read()  # wait to be killed
"""


def test_servers_die_when_their_owner_is_killed(tmp_path):
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    pids = json.loads(owner.stdout.readline())
    assert all(processes.is_ours(pid, exe, marker) for pid, exe, marker in pids.values())
    owner.send_signal(signal.SIGKILL)  # a crashed test session: no cleanup code runs
    owner.wait(10)
    gone = processes.wait_until(lambda: not any(processes.is_ours(*p) for p in pids.values()), timeout=10)
    assert gone, f"servers outlived their owner: {pids}"


def test_cli_up_detaches_and_down_stops(tmp_path):
    env = {**os.environ, "KAFKA_ICEBERG_RUN_DIR": str(tmp_path)}
    cli = [sys.executable, "-m", "kafka_iceberg.cli.main", "local"]
    up = subprocess.run([*cli, "up"], capture_output=True, text=True, env=env, check=True)
    assert "local stack up" in up.stdout
    state = LocalStack(tmp_path).read_state()
    assert state is not None and not state.owned
    # The servers outlived the CLI process that started them.
    assert all(processes.is_ours(s.pid, s.executable, s.marker) for s in state.services.values())
    subprocess.run([*cli, "down"], capture_output=True, text=True, env=env, check=True)
    assert not any(processes.is_ours(s.pid, s.executable, s.marker) for s in state.services.values())
    status = subprocess.run([*cli, "status"], capture_output=True, text=True, env=env, check=False)
    assert status.returncode == 1 and "not running" in status.stdout


def test_a_server_that_never_answers_fails_with_its_log(tmp_path, monkeypatch):
    from kafka_iceberg.errors import StackError
    from kafka_iceberg.local import stack as stack_module

    monkeypatch.setattr(stack_module, "_kafka_ok", lambda bootstrap: False)
    with pytest.raises(StackError, match="kafka did not answer"):
        LocalStack(tmp_path, services=("kafka",)).up(owned=True, timeout=1)
    assert not (tmp_path / "stack.json").exists()
    time.sleep(0.1)


def test_a_split_stack_restarts_one_service_on_its_ports_with_its_data(tmp_path):
    from kafka_iceberg.local.readback import pyiceberg_catalog
    from tests.support.kafka import create_topic, produce, read_count

    stack = LocalStack(tmp_path, split=True)
    state = stack.up(owned=True)
    try:
        assert set(state.services) == {"seaweedfs", "s3", "catalog", "kafka", "registry"}
        for svc in state.services.values():
            assert _listening_addresses(svc.pid) == {"127.0.0.1"}, f"{svc.name} listens beyond loopback"
        catalog = pyiceberg_catalog(state.describe())
        catalog.create_namespace("kept")
        create_topic(state.kafka_bootstrap, "kept", partitions=2)
        produce(state.kafka_bootstrap, "kept", [(None, f"v{i}") for i in range(20)])

        for name in ("catalog", "s3", "kafka"):
            before = stack.read_state().services[name]
            stack.stop_service(name)
            assert not processes.is_ours(before.pid, before.executable, before.marker)
            # Down, its ports stay promised to it (weed's gRPC ports too): no other stack takes them.
            grpc = {p + GRPC_OFFSET for p in before.ports.values()} if name != "kafka" else set()
            assert set(before.ports.values()) | grpc <= processes.reserved_ports()
            health = stack.status()["health"]
            # Only the stopped service is down: the others keep answering.
            assert health == {n: n != name for n in state.services}, health
            after = stack.start_service(name)
            assert after.ports == before.ports and after.pid != before.pid
            assert stack.status()["running"] is True

        assert ("kept",) in pyiceberg_catalog(state.describe()).list_namespaces()
        # The broker keeps its log under the run directory: topics survive its restart.
        values = sorted(value for _p, _o, value in read_count(state.kafka_bootstrap, "kept", 20))
        assert values == sorted(f"v{i}".encode() for i in range(20))
    finally:
        stack.down()
    assert not any(processes.is_ours(s.pid, s.executable, s.marker) for s in state.services.values())
