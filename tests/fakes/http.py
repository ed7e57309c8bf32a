"""A real HTTP server on loopback that records every request: tests talk to
real servers, not mocks.

``FakeAPI`` runs a ``ThreadingHTTPServer`` on ``127.0.0.1:0`` in a daemon thread.
Each request is recorded — method, raw path, query, headers, body, when it
arrived, when its answer was fully written, how many body bytes went out and
whether the client hung up — and dispatched to the first route whose method and
path pattern match. The routes of ``tests.fakes.apis`` answer in the shapes of
the public APIs the examples call (ip-api, open-meteo, restcountries,
frankfurter, GitHub, an httpbin-like POST sink).

Faults are injected per route, thread-safely, while the server runs::

    fake.fail("github_issues", status=503, times=2)   # two 503s, then the real answer
    fake.fail("github_repo", status=404)              # every time
    fake.delay("weather", 0.3)                        # every answer of the route waits
    fake.respond("github_languages", lambda req, m: FakeResponse.json({}))

Arrival and finish times are ``time.monotonic()`` values of this process, so a
test can tell whether two requests were in flight at the same time.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CHUNK = 64 * 1024


@dataclass
class FakeResponse:
    """What a handler answers. ``stream`` (with optional ``length``) sends a body in chunks."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterable[bytes] | None = None
    length: int | None = None  # Content-Length of a stream; None sends it chunked

    @classmethod
    def json(cls, data: Any, status: int = 200, headers: dict[str, str] | None = None):
        body = json.dumps(data, ensure_ascii=False).encode()
        return cls(
            status, body, {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        )

    @classmethod
    def large_json(cls, size: int, *, chunked: bool = False) -> FakeResponse:
        """A JSON document of exactly ``size`` bytes, generated chunk by chunk (never in memory)."""
        head, tail = b'{"padding":"', b'"}'
        filler = size - len(head) - len(tail)

        def chunks() -> Iterator[bytes]:
            yield head
            left = filler
            block = b"x" * CHUNK
            while left > 0:
                yield block[: min(CHUNK, left)]
                left -= CHUNK
            yield tail

        return cls(
            200,
            headers={"Content-Type": "application/json"},
            stream=chunks(),
            length=None if chunked else size,
        )


@dataclass
class RecordedRequest:
    """One request as the server saw it. ``path`` is raw (percent-encoding kept)."""

    route: str | None
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    received_at: float
    finished_at: float | None = None
    status: int | None = None
    bytes_sent: int = 0  # body bytes written
    disconnected: bool = False  # the client went away before the whole body was written
    peer: tuple[str, int] | None = None  # the client's address and port: its connection

    @property
    def segments(self) -> list[str]:
        """The decoded path segments: ``/repos/a%2Fb/c`` → ``["repos", "a/b", "c"]``."""
        return [unquote(s) for s in self.path.strip("/").split("/")]

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def overlaps(self, other: RecordedRequest) -> bool:
        """Both were in flight at once (arrived before the other's answer was written)."""
        mine = self.finished_at if self.finished_at is not None else float("inf")
        theirs = other.finished_at if other.finished_at is not None else float("inf")
        return self.received_at < theirs and other.received_at < mine


Handler = Callable[[RecordedRequest, re.Match], FakeResponse]


@dataclass
class Route:
    name: str
    method: str
    pattern: re.Pattern
    handler: Handler


@dataclass
class _Fault:
    status: int
    remaining: int | None  # None: every time
    body: Any
    headers: dict[str, str]
    delay: float


class LoopbackServer:
    """A ThreadingHTTPServer on 127.0.0.1:0 in a daemon thread; ``handler`` reaches the
    subclass as ``self.server.fake``. Subclasses set ``handler`` and keep their state."""

    handler: type[BaseHTTPRequestHandler]

    _server: ThreadingHTTPServer | None = None

    def start(self):
        server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        server.daemon_threads = True
        server.block_on_close = False
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        if self._server is None:
            raise RuntimeError(f"the {type(self).__name__} server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"


class FakeAPI(LoopbackServer):
    """The server plus its routes, recorded requests and injected faults."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._routes: list[Route] = []
        self._requests: list[RecordedRequest] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._delays: dict[str, float] = {}
        self._holds: dict[str, threading.Event] = {}

    @property
    def url(self) -> str:
        return self.origin

    def stop(self) -> None:
        self.heal()  # no answer stays held after the test
        super().stop()

    # --- routes and faults ---------------------------------------------------

    def route(self, name: str, method: str, pattern: str, handler: Handler) -> None:
        """Add a route; ``pattern`` is a regex matched against the whole raw path."""
        with self._lock:
            self._routes.append(Route(name, method.upper(), re.compile(pattern), handler))

    def respond(self, name: str, handler: Handler) -> None:
        """Replace the handler of an existing route."""
        with self._lock:
            for route in self._routes:
                if route.name == name:
                    route.handler = handler
                    return
        raise KeyError(f"no route named {name!r}")

    def fail(
        self,
        name: str,
        *,
        status: int = 500,
        times: int | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Answer ``status`` on route ``name`` the next ``times`` requests (None: always).

        Faults queue up in the order they are added; the real answer follows.
        """
        self._known(name)
        fault = _Fault(status, times, body, dict(headers or {}), delay)
        with self._lock:
            self._faults.setdefault(name, []).append(fault)

    def delay(self, name: str, seconds: float) -> None:
        """Every answer on route ``name`` (failures included) waits ``seconds`` first."""
        self._known(name)
        with self._lock:
            self._delays[name] = seconds

    def hold(self, name: str) -> threading.Event:
        """Answers on route ``name`` wait until the returned event is set: a request
        stays in flight exactly until the test lets it go, however slow the machine
        (``heal`` and ``stop`` let held answers go too)."""
        self._known(name)
        with self._lock:
            release = self._holds[name] = threading.Event()
        return release

    def heal(self, name: str | None = None) -> None:
        """Drop the faults, delays and holds of one route (or of all)."""
        with self._lock:
            for held in self._holds.values() if name is None else [self._holds.get(name)]:
                if held is not None:
                    held.set()
            for table in (self._faults, self._delays, self._holds):
                if name is None:
                    table.clear()
                else:
                    table.pop(name, None)

    def _known(self, name: str) -> None:
        with self._lock:
            if not any(r.name == name for r in self._routes):
                raise KeyError(f"no route named {name!r}")

    # --- what was received -------------------------------------------------

    def requests(self, route: str | None = None) -> list[RecordedRequest]:
        """Recorded requests in arrival order, optionally of one route only."""
        with self._lock:
            found = list(self._requests)
        return [r for r in found if route is None or r.route == route]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def wait_finished(self, timeout: float = 5.0) -> None:
        """Wait until every recorded request has been answered (or its client left)."""
        deadline = time.monotonic() + timeout
        while any(r.finished_at is None for r in self.requests()):
            if time.monotonic() > deadline:
                raise TimeoutError("the fake server is still answering")
            time.sleep(0.01)

    # --- dispatch (server threads) -----------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _dispatch(self, request: RecordedRequest) -> FakeResponse:
        with self._lock:
            routes = list(self._routes)
        allowed: list[str] = []
        for route in routes:
            match = route.pattern.fullmatch(request.path)
            if match is None:
                continue
            if route.method != request.method:
                allowed.append(route.method)
                continue
            request.route = route.name
            fault, pause = self._take_fault(route.name)
            if pause:
                time.sleep(pause)
            with self._lock:
                held = self._holds.get(route.name)
            if held is not None:
                held.wait()
            if fault is not None:
                body = fault.body if fault.body is not None else {"message": "injected failure"}
                if isinstance(body, bytes):
                    return FakeResponse(fault.status, body, dict(fault.headers))
                return FakeResponse.json(body, fault.status, fault.headers)
            return route.handler(request, match)
        if allowed:
            return FakeResponse.json({"message": "Method Not Allowed"}, 405)
        return FakeResponse.json({"message": f"no fake route for {request.path}"}, 404)

    def _take_fault(self, name: str) -> tuple[_Fault | None, float]:
        with self._lock:
            pause = self._delays.get(name, 0.0)
            queue = self._faults.get(name, [])
            while queue and queue[0].remaining == 0:
                queue.pop(0)
            if not queue:
                return None, pause
            fault = queue[0]
            if fault.remaining is not None:
                fault.remaining -= 1
            return fault, pause + fault.delay


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stalls
    timeout = 30  # a stalled client never pins a server thread forever

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _handle(self) -> None:
        fake: FakeAPI = self.server.fake  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        body = self._read_body()
        request = RecordedRequest(
            route=None,
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            received_at=time.monotonic(),
            peer=self.client_address[:2],
        )
        fake._record(request)
        try:
            response = fake._dispatch(request)
        except Exception as exc:  # a handler bug answers 500, visibly
            response = FakeResponse.json({"message": f"fake handler error: {exc!r}"}, 500)
        request.status = response.status
        try:
            self._write(response, request)
        finally:
            request.finished_at = time.monotonic()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _write(self, response: FakeResponse, request: RecordedRequest) -> None:
        self.send_response(response.status)
        headers = {"Content-Type": "application/json", **response.headers}
        chunked = response.stream is not None and response.length is None
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
        else:
            size = response.length if response.stream is not None else len(response.body)
            headers["Content-Length"] = str(size)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        pieces = response.stream if response.stream is not None else [response.body]
        try:
            for piece in pieces:
                if not piece:
                    continue
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                else:
                    self.wfile.write(piece)
                request.bytes_sent += len(piece)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # BrokenPipe, ConnectionReset, timeout: the client left
            request.disconnected = True
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle


FakeAPI.handler = _RequestHandler
