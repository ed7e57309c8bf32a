"""Fixtures for the tools tests: a real HTTP server on loopback, call contexts."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tools.calls import ToolCallContext
from tools.redaction import Redactor
from tools.spec import ToolSpec


@dataclass
class Received:
    """One request as the server saw it (raw path, not decoded)."""

    method: str
    raw_path: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.raw_path).path

    @property
    def query(self) -> list[tuple[str, str]]:
        return parse_qsl(urlsplit(self.raw_path).query, keep_blank_values=True)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes | Iterable[bytes] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    length: int | None = None  # Content-Length for streamed bodies

    @classmethod
    def json(cls, data, status: int = 200, **headers: str) -> Reply:
        return cls(
            status=status,
            body=json.dumps(data).encode(),
            headers={"Content-Type": "application/json", **headers},
        )


class LoopbackServer:
    """A real ThreadingHTTPServer on 127.0.0.1; ``handler`` decides each reply."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.handler: Callable[[Received], Reply] = lambda req: Reply.json({"ok": True})
        self.bytes_sent = 0
        self.done = threading.Event()
        self.stopping = threading.Event()
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.loopback = self  # type: ignore[attr-defined]
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def reply(self, reply: Reply) -> None:
        self.handler = lambda req: reply

    def close(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stalls
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # quiet
        pass

    def _handle(self) -> None:
        state: LoopbackServer = self.server.loopback  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        received = Received(self.command, self.path, headers, body)
        state.requests.append(received)
        reply = state.handler(received)
        if reply.delay and state.stopping.wait(reply.delay):
            return
        self._write(state, reply)

    def _write(self, state: LoopbackServer, reply: Reply) -> None:
        chunks = [reply.body] if isinstance(reply.body, bytes) else reply.body
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        size = len(reply.body) if isinstance(reply.body, bytes) else reply.length
        self.send_header("Content-Length", str(size or 0))
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                state.bytes_sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            state.done.set()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    srv = LoopbackServer()
    yield srv
    srv.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_client() -> Iterator[httpx.Client]:
    with httpx.Client() as client:
        yield client


@pytest.fixture
def make_ctx(http_client: httpx.Client, tmp_path: Path) -> Callable[..., ToolCallContext]:
    """Build a ToolCallContext: ``make_ctx(env={...}, max_response_bytes=...)``."""

    def build(**overrides) -> ToolCallContext:
        values = {
            "env": {},
            "redactor": Redactor(),
            "http": http_client,
            "output_dir": tmp_path / "out",
            "data_dirs": (tmp_path / "data",),
        }
        values.update(overrides)
        return ToolCallContext(**values)

    return build


def make_spec(
    url="/x",
    *,
    method="GET",
    extract=None,
    auth=None,
    name="t",
    idempotent=None,
    secret_env=(),
    **request,
) -> ToolSpec:
    """An http tool on ``{{env.BASE}}``; ``http_*`` keywords set other http keys
    (``http_pagination={...}``), the rest are request keys."""
    http_keys = {k[5:]: request.pop(k) for k in list(request) if k.startswith("http_")}
    http = {
        "base_url": "{{env.BASE}}",
        "request": {"method": method, "url": url, **request},
        "response_extract": extract or {},
        **http_keys,
    }
    if auth:
        http["auth"] = auth
    data = {"name": name, "http": http, "secret_env": list(secret_env)}
    if idempotent is not None:
        data["idempotent"] = idempotent
    return ToolSpec.model_validate(data)


@pytest.fixture
def ctx_for(server, make_ctx):
    """A context whose ``BASE`` is the loopback ``server``; UPPER keywords are env."""

    def build(**env_and_overrides):
        overrides = {k: v for k, v in env_and_overrides.items() if k.islower()}
        env = {"BASE": server.url, **{k: v for k, v in env_and_overrides.items() if k.isupper()}}
        return make_ctx(env=env, **overrides)

    return build


@pytest.fixture(scope="session")
def httpbin() -> Iterator[str]:
    """The base URL of httpbin (PyPI) under gunicorn on loopback, one per session."""
    from tests.fakes.httpbin import run_httpbin

    with run_httpbin() as url:
        yield url


# --- an MCP server file on the loopback MCP server (tool sources) -----------------------

MCP_SERVER_FILE = """
mcp_server:
  name: fake
  url: "{{env.FAKE_MCP_URL}}"
  headers: {X-Token: "{{env.FAKE_MCP_TOKEN}}"}
  secret_headers: [X-Token]
  timeout: 5
  retry: {max_attempts: 1}
"""


@pytest.fixture
def mcp_fake(monkeypatch):
    """The SDK's MCP server on loopback (``tests/fakes/mcp_server.py``), its URL and token
    in the environment the server file reads."""
    from tests.fakes.mcp_server import TOKEN, running_mcp_fake

    with running_mcp_fake() as server:
        monkeypatch.setenv("FAKE_MCP_URL", server.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        yield server


@pytest.fixture
def server_file(tmp_path):
    """``tools/fake.yaml``: the server file of ``mcp_fake``."""
    path = tmp_path / "tools" / "fake.yaml"
    path.parent.mkdir()
    path.write_text(MCP_SERVER_FILE, encoding="utf-8")
    return path
