"""A TCP proxy in front of an HTTP server that forwards every byte unchanged and records each request line.

Put in front of the REST catalog, it counts the catalog round trips a client makes: the bytes are
not touched, so SigV4 signatures (computed over the Host the client sent) still verify.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from types import TracebackType

_REQUEST_LINE = re.compile(rb"^([A-Z]+) (\S+) HTTP/1\.[01]\r\n")
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)


class CountingProxy:
    """``127.0.0.1:<port>`` forwarding to ``upstream``; :attr:`requests` holds ``(method, path)`` in order."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def take(self) -> list[tuple[str, str]]:
        """The requests recorded so far, forgetting them."""
        with self._lock:
            out, self.requests = self.requests, []
        return out

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _requests(self, source: socket.socket, sink: socket.socket) -> None:
        """Forward the client's bytes, reading request heads (and skipping bodies) as they pass."""
        buffer, body_left = b"", 0
        while chunk := _recv(source):
            sink.sendall(chunk)
            buffer += chunk
            while True:
                if body_left:
                    skipped = min(body_left, len(buffer))
                    buffer, body_left = buffer[skipped:], body_left - skipped
                    if body_left:
                        break
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    break
                head, buffer = buffer[: end + 2], buffer[end + 4 :]
                line = _REQUEST_LINE.match(head)
                assert line, f"not an HTTP/1.x request head: {head[:80]!r}"
                assert b"transfer-encoding" not in head.lower(), "chunked request bodies are not followed"
                with self._lock:
                    self.requests.append((line.group(1).decode(), line.group(2).decode()))
                length = _CONTENT_LENGTH.search(head)
                body_left = int(length.group(1)) if length else 0
        _close(sink)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while chunk := _recv(source):
            sink.sendall(chunk)
        _close(sink)

    def close(self) -> None:
        self._server.close()
        for s in self._sockets:
            _close(s)

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(65536)
    except OSError:
        return b""


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
