"""Loopback proxies that make the local stack check credentials, so a test can prove a secret was used.

SeaweedFS runs anonymous here (Spark cannot sign the REST catalog's requests without AWS SDK v2), so
the proxies stand in front of it and refuse what is not authenticated, like a real service:

- :class:`CatalogProxy`: an Iceberg REST catalog with OAuth2 client credentials. ``POST
  /v1/oauth/tokens`` exchanges the client id and secret for an access token; every other request
  needs ``Authorization: Bearer <token>``.
- :class:`S3Proxy`: S3 that verifies each request's AWS Signature Version 4 with the secret key.

Both forward what they accept to the anonymous upstream without the credentials, and count.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import re
import secrets
import threading
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "host", "content-length", "authorization"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _handle(self) -> None:
        body = self._body()
        proxy = self.server.proxy
        refused = proxy.refuse(self, body)
        if refused is not None:
            status, content_type, payload = refused
            proxy.count("refused")
            self._reply(status, [("Content-Type", content_type)], payload)
            return
        proxy.count("accepted")
        answer = proxy.answer(self, body)
        if answer is not None:
            status, content_type, payload = answer
            self._reply(status, [("Content-Type", content_type)], payload)
            return
        body, headers = proxy.rewrite(self, body)
        conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
        try:
            conn.request(self.command, self.path, body=body if body or self.command in ("PUT", "POST") else None,
                         headers=headers)  # fmt: skip
            resp = conn.getresponse()
            data = resp.read()
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP_BY_HOP]
            length = resp.getheader("Content-Length") if self.command == "HEAD" else None
            self._reply(resp.status, kept, data, length=length)
        finally:
            conn.close()

    def _reply(self, status: int, headers: list[tuple[str, str]], data: bytes, length: str | None = None) -> None:
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", length if length is not None else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    proxy: _Proxy


class _Proxy:
    """Base: a server on 127.0.0.1 forwarding accepted requests to ``upstream``."""

    def __init__(self, upstream: str):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def __enter__(self) -> _Proxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def refuse(self, req: _Handler, body: bytes) -> tuple[int, str, bytes] | None:
        """Why the request is refused (status, content type, body), or None to let it through."""
        raise NotImplementedError

    def answer(self, req: _Handler, body: bytes) -> tuple[int, str, bytes] | None:
        """A reply of the proxy's own, or None to forward."""
        return None

    def rewrite(self, req: _Handler, body: bytes) -> tuple[bytes, dict[str, str]]:
        """Body and headers sent upstream: the request's, less the hop-by-hop ones and the credentials."""
        return body, {k: v for k, v in req.headers.items() if k.lower() not in _HOP_BY_HOP}


class CatalogProxy(_Proxy):
    """An Iceberg REST catalog that wants OAuth2 client credentials."""

    def __init__(self, upstream: str, client_id: str, client_secret: str):
        super().__init__(upstream)
        self.client_id, self.client_secret = client_id, client_secret
        self.tokens: set[str] = set()

    def _credentials(self, req: _Handler, body: bytes) -> tuple[str, str]:
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode()).items()}
        basic = req.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            cid, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            return urllib.parse.unquote_plus(cid), urllib.parse.unquote_plus(secret)
        return form.get("client_id", ""), form.get("client_secret", "")

    def refuse(self, req: _Handler, body: bytes) -> tuple[int, str, bytes] | None:
        if req.path.split("?")[0].endswith("/v1/oauth/tokens"):
            cid, secret = self._credentials(req, body)
            if cid == self.client_id and hmac.compare_digest(secret, self.client_secret):
                return None
            error = {"error": "invalid_client", "error_description": "bad client credentials"}
            return 401, "application/json", json.dumps(error).encode()
        auth = req.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[7:] in self.tokens:
            return None
        error = {"error": {"message": "not authorized", "type": "NotAuthorizedException", "code": 401}}
        return 401, "application/json", json.dumps(error).encode()

    def answer(self, req: _Handler, body: bytes) -> tuple[int, str, bytes] | None:
        if not req.path.split("?")[0].endswith("/v1/oauth/tokens"):
            return None
        token = secrets.token_urlsafe(24)
        with self._lock:
            self.tokens.add(token)
        self.count("tokens")
        reply = {
            "access_token": token,
            "token_type": "bearer",
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "expires_in": 3600,
        }
        return 200, "application/json", json.dumps(reply).encode()


_AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?"
                   r"SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})")  # fmt: skip
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


class S3Proxy(_Proxy):
    """S3 that checks AWS Signature Version 4 against one access key."""

    def __init__(self, upstream: str, access_key_id: str, secret_access_key: str):
        super().__init__(upstream)
        self.access_key_id, self.secret_access_key = access_key_id, secret_access_key

    def _expected(self, req: _Handler, m: re.Match[str]) -> str:
        _key, date, region, service, signed, _sig = m.groups()
        path, _, query = req.path.partition("?")
        pairs = sorted(
            (_quote(urllib.parse.unquote(k)), _quote(urllib.parse.unquote(v)))
            for k, _, v in (p.partition("=") for p in query.split("&") if p)
        )
        names = signed.split(";")
        canonical = "\n".join(
            [
                req.command,
                path,
                "&".join(f"{k}={v}" for k, v in pairs),
                "".join(f"{n}:{' '.join((req.headers.get(n) or '').split())}\n" for n in names),
                signed,
                req.headers.get("x-amz-content-sha256") or hashlib.sha256(b"").hexdigest(),
            ]
        )
        scope = f"{date}/{region}/{service}/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", req.headers["x-amz-date"], scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = f"AWS4{self.secret_access_key}".encode()
        for part in (date, region, service, "aws4_request"):
            key = _hmac(key, part)
        return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()

    def refuse(self, req: _Handler, body: bytes) -> tuple[int, str, bytes] | None:
        m = _AUTH.fullmatch(req.headers.get("Authorization", "").strip())
        if m and m.group(1) == self.access_key_id and hmac.compare_digest(self._expected(req, m), m.group(6)):
            return None
        code = "SignatureDoesNotMatch" if m else "AccessDenied"
        return 403, "application/xml", f"<Error><Code>{code}</Code></Error>".encode()

    def rewrite(self, req: _Handler, body: bytes) -> tuple[bytes, dict[str, str]]:
        body, headers = super().rewrite(req, body)
        if req.headers.get("x-amz-content-sha256") == STREAMING:  # unwrap aws-chunked: the upstream is unsigned
            data, rest = b"", body
            while rest:
                line, _, rest = rest.partition(b"\r\n")
                size = int(line.split(b";")[0], 16)
                data, rest = data + rest[:size], rest[size + 2 :]
                if size == 0:
                    break
            self.count("aws-chunked")
            body = data
            encoding = ",".join(
                e.strip()
                for k, v in headers.items()
                if k.lower() == "content-encoding"
                for e in v.split(",")
                if e.strip() not in ("aws-chunked", "")
            )
            drop = ("content-encoding", "x-amz-decoded-content-length", "x-amz-content-sha256")
            headers = {k: v for k, v in headers.items() if k.lower() not in drop}
            headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
            if encoding:
                headers["Content-Encoding"] = encoding
        return body, headers
