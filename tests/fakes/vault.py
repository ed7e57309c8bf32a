"""A real HTTP server on loopback that speaks HashiCorp Vault's KV version 2 HTTP API.

No Vault server can be installed here (Debian does not package it, PyPI ships no
server binary, and a release download from the public internet is not allowed), so
the Vault tests talk to this one, through ``hvac``, over real HTTP. It implements
what flowpilot uses of the documented API, with Vault's answers:

- ``GET /v1/<mount>/data/<path>`` with ``X-Vault-Token`` (and optionally
  ``X-Vault-Namespace``): ``200 {"data": {"data": {...}, "metadata": {...}}}`` for the
  current version; ``403 {"errors": ["permission denied"]}`` for a token that is not
  known or whose policy does not cover the path; ``404 {"errors": []}`` for a path
  with no secret (or an unknown mount, as Vault answers for a path under none);
- ``POST``/``PUT /v1/<mount>/data/<path>`` with ``{"data": {...}}``: a new version.

Secrets are put and changed from the test with :meth:`FakeVault.put`; every request
is counted by path (``reads``) so a test can tell a cached read from a new one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeVault:
    """Vault KV v2 on ``127.0.0.1:<port>``: mounts of secrets, tokens with the paths
    (``mount/path`` prefixes) each may read, and an optional namespace."""

    def __init__(self, token: str, *, mounts: tuple[str, ...] = ("secret",), namespace: str = ""):
        self.namespace = namespace
        self._mounts = {mount: {} for mount in mounts}  # mount -> path -> versions
        self._tokens: dict[str, tuple[str, ...] | None] = {token: None}  # None: every path
        self._lock = threading.Lock()
        self.reads: dict[str, int] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_token(self, token: str, paths: tuple[str, ...]) -> None:
        """A token whose policy allows reading only under ``paths`` (``mount/prefix``)."""
        with self._lock:
            self._tokens[token] = paths

    def put(self, mount: str, path: str, data: dict[str, Any]) -> int:
        """Write a new version of ``mount/path``; its version number."""
        with self._lock:
            versions = self._mounts[mount].setdefault(path.strip("/"), [])
            versions.append(dict(data))
            return len(versions)

    def read_count(self, mount: str, path: str) -> int:
        with self._lock:
            return self.reads.get(f"{mount}/{path.strip('/')}", 0)

    def _answer(self, method: str, url: str, token: str, namespace: str, body: bytes):
        if not url.startswith("/v1/"):
            return 404, {"errors": []}
        with self._lock:
            if token not in self._tokens or namespace != self.namespace:
                return 403, {"errors": ["permission denied"]}
            rest = url[len("/v1/") :].split("?", 1)[0]
            mount, _, tail = rest.partition("/")
            kind, _, path = tail.partition("/")
            path = path.strip("/")
            allowed = self._tokens[token]
            if allowed is not None and not any(f"{mount}/{path}".startswith(p) for p in allowed):
                return 403, {"errors": ["permission denied"]}
            if mount not in self._mounts or kind != "data" or not path:
                return 404, {"errors": []}
            versions = self._mounts[mount].setdefault(path, []) if method != "GET" else None
            if method == "GET":
                self.reads[f"{mount}/{path}"] = self.reads.get(f"{mount}/{path}", 0) + 1
                found = self._mounts[mount].get(path)
                if not found:
                    return 404, {"errors": []}
                return 200, _envelope({"data": dict(found[-1]), "metadata": _meta(len(found))})
            assert versions is not None
            versions.append(dict(json.loads(body or b"{}").get("data") or {}))
            return 200, _envelope(_meta(len(versions)))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        vault = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stalls
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, data = vault._answer(
                    self.command,
                    self.path,
                    self.headers.get("X-Vault-Token") or "",
                    self.headers.get("X-Vault-Namespace") or "",
                    body,
                )
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = _serve

        return Handler


def _meta(version: int) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {"created_time": now, "custom_metadata": None, "deletion_time": "",
            "destroyed": False, "version": version}  # fmt: skip


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {"request_id": "00000000-0000-0000-0000-000000000000", "lease_id": "",
            "renewable": False, "lease_duration": 0, "data": data, "wrap_info": None,
            "warnings": None, "auth": None}  # fmt: skip


@contextmanager
def running_vault(token: str, **options: Any) -> Iterator[FakeVault]:
    vault = FakeVault(token, **options)
    try:
        yield vault
    finally:
        vault.close()
