"""Start, find and stop server processes by PID, without leaving orphans behind."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: ask the kernel to SIGKILL it when the process
    # that started it dies, so a crashed or killed test session cannot leave servers running.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    cmd: Sequence[str], *, log: Path, env: Mapping[str, str], owned: bool, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a server writing to ``log``.

    Args:
        cmd: the command line.
        log: file receiving stdout and stderr.
        env: the complete environment of the child.
        owned: tie the child's life to this process (tests, demo). Otherwise the child is detached
            into its own session and outlives the caller (``kafka-iceberg local up``).
        cwd: working directory.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
            preexec_fn=_die_with_parent if owned else None,  # noqa: PLW1509 - no threads involved
            start_new_session=not owned,
        )


def cmdline(pid: int) -> list[str]:
    """The command line of a live process, or ``[]`` when there is none."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_ours(pid: int, executable: str, marker: str = "") -> bool:
    """True when ``pid`` is alive and runs ``executable`` (guards against recycled PIDs).

    ``marker``, when given, must also be an argument of the command line (``kafka.Kafka`` tells the
    broker's JVM from any other ``java``).
    """
    if pid <= 0:
        return False
    args = cmdline(pid)
    if not args or (marker and marker not in args):
        return False
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
            return False  # a zombie: already dead, only waiting to be reaped
    return Path(args[0]).name == Path(executable).name


def stop(pid: int, executable: str, *, grace: float = 3.0, marker: str = "") -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. No-op if the PID is not ours."""
    if not is_ours(pid, executable, marker):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not is_ours(pid, executable, marker):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and is_ours(pid, executable, marker):
        _reap(pid)
        time.sleep(0.05)


def _reap(pid: int) -> None:
    # Collect our own exited children so they do not linger as zombies.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# Ports handed out but perhaps not bound yet, shared by every process of this user on the machine:
# a stack starts its servers one after the other without waiting, and two test workers start theirs
# at once, so a port that looks free may already be promised to a server still starting.
RESERVED_SECONDS = 300.0


def _reservations() -> Path:
    return Path(tempfile.gettempdir()) / f"kafka-iceberg-ports-{os.getuid()}.json"


@contextlib.contextmanager
def _held_ports() -> Iterator[dict[int, float]]:
    """The ports reserved now (port -> until when), under the lock; what the block leaves is saved."""
    path = _reservations()
    with path.with_suffix(".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = time.time()
        try:
            held = {int(p): until for p, until in json.loads(path.read_text()).items() if until > now}
        except (OSError, ValueError):
            held = {}
        yield held
        path.write_text(json.dumps(held))


def reserve_ports(ports: Iterable[int]) -> None:
    """Hold ``ports`` for ``RESERVED_SECONDS`` more: a server stopped to start again on them keeps them."""
    with _held_ports() as held:
        held.update(dict.fromkeys(ports, time.time() + RESERVED_SECONDS))


def reserved_ports() -> set[int]:
    """The ports handed out or held and not yet released by time."""
    with _held_ports() as held:
        return set(held)


def free_port_block(count: int, *, also_plus: int = 0, low: int = 12000, high: int = 22000) -> list[int]:
    """``count`` consecutive free loopback ports (and each port + ``also_plus``, when given).

    The default range sits below Linux's ephemeral range (32768+) even after adding 10000, so
    client connections cannot grab a port between choosing it and the server binding it. A chosen
    block is reserved for ``RESERVED_SECONDS`` (a file under the temporary directory, under a lock):
    no other call, in this process or another, hands out those ports while their server starts.
    """
    rng = int.from_bytes(os.urandom(2), "big")
    span = high - low - count
    with _held_ports() as held:
        for attempt in range(200):
            base = low + (rng + attempt * 7919) % span
            ports = list(range(base, base + count))
            wanted = ports + ([p + also_plus for p in ports] if also_plus else [])
            if not held.keys() & set(wanted) and all(port_is_free(p) for p in wanted):
                held.update(dict.fromkeys(wanted, time.time() + RESERVED_SECONDS))
                return ports
    raise RuntimeError(f"no block of {count} free loopback ports between {low} and {high}")


def wait_until(check: Callable[[], bool], *, timeout: float, interval: float = 0.1) -> bool:
    """Poll ``check`` until it returns True or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            if check():
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
