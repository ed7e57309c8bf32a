"""What every benchmark needs and none of them measures.

* ``LoopbackServer``: a ``ThreadingHTTPServer`` on ``127.0.0.1:0`` in a daemon
  thread. ``GET /ping?seq=K&delay_ms=D`` waits ``D`` ms, then answers
  ``{"ok": true, "n": K + 1}`` (HTTP/1.1 keep-alive, so the engine and the
  baselines reuse connections alike).
* ``throwaway_database``: Django set up on a database made for this run —
  SQLite in a temporary directory, or a fresh database on the PostgreSQL server
  of ``--database-url`` — and removed afterwards. The developer's database is
  never opened.
* ``compare``: warm-up once, then engine and baseline interleaved ``repeat``
  times (so drift hits both alike); medians of ``time.perf_counter`` spans.
* ``Row`` and ``format_table``: the printed result.

Nothing here imports the project before ``django.setup()``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class _PingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: connections are reused, as in production
    disable_nagle_algorithm = True  # headers and body go out as two writes

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        seq = int(query.get("seq", ["0"])[0])
        delay_ms = int(query.get("delay_ms", ["0"])[0])
        if delay_ms:
            time.sleep(delay_ms / 1000)
        body = json.dumps({"ok": True, "n": seq + 1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:
        """Silent: a benchmark prints only its table."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a fan-out opens its connections all at once


class LoopbackServer:
    """The fake API every benchmark calls; ``url`` is its origin (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _PingHandler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="bench-http", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


_SINK_SERVER = r"""
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

lock = threading.Lock()
bodies = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with lock:
            bodies.append(body)
        self._answer(b"")

    def do_GET(self):
        spans = 0
        with lock:
            for body in bodies:
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                spans += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        self._answer(str(spans).encode())

    def _answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


class TraceSink:
    """An OTLP/HTTP receiver on loopback, in a process of its own (as a collector is):
    it keeps each request and answers 200 at once, as a collector's receiver hands a
    request to its pipeline and answers, so what the benchmark's process pays is only
    the sending; it decodes what it kept and counts the spans when asked (``spans``)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spans(self) -> int:
        with urllib.request.urlopen(f"{self.url}/count", timeout=10) as answer:
            return int(answer.read())

    def __enter__(self) -> TraceSink:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SINK_SERVER], stdout=subprocess.PIPE, text=True
        )
        assert self._process.stdout is not None
        self.port = int(self._process.stdout.readline())
        return self

    def __exit__(self, *exc) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)


# --- The database -----------------------------------------------------------


@contextmanager
def throwaway_database(database_url: str | None) -> Iterator[str]:
    """Set up Django on a database that exists only for this run; yield its description.

    Without ``database_url``: a SQLite file in a temporary directory, migrated
    quietly. With one: the URL names a PostgreSQL *server*; a database
    ``<name>_bench_<pid>`` is created there (Django's test-database machinery, so
    the role needs CREATEDB), migrated, and dropped at the end.
    """
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    if database_url is None:
        with tempfile.TemporaryDirectory(prefix="flowpilot-bench-") as tmp:
            os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
            _django_setup()
            from django.core.management import call_command
            from django.db import connections

            call_command("migrate", verbosity=0, interactive=False)
            try:
                yield f"SQLite (throwaway file in {tmp})"
            finally:
                connections.close_all()
        return
    os.environ["DATABASE_URL"] = database_url
    _django_setup()
    from django.db import connection

    settings_dict = connection.settings_dict
    original = settings_dict["NAME"]
    settings_dict.setdefault("TEST", {})["NAME"] = f"{original}_bench_{os.getpid()}"
    created = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    server = " ".join(filter(None, (connection.display_name, _server_version(connection))))
    host = settings_dict.get("HOST") or "local socket"
    try:
        yield f"{server} (throwaway database {created} on {host})"
    finally:
        _drop_other_sessions(connection, created)
        connection.creation.destroy_test_db(original, verbosity=0)


def _drop_other_sessions(connection, name: str) -> None:
    """End the sessions still open on the throwaway database (the in-process driver's
    worker threads keep theirs, ``CONN_MAX_AGE``), so it can be dropped."""
    from django.db import connections

    connections.close_all()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
    connection.close()


def _django_setup() -> None:
    import django

    django.setup()


def _server_version(connection) -> str:
    if connection.vendor != "postgresql":
        return ""
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return cursor.fetchone()[0].split()[0]


# --- Timing -----------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """Median seconds of the engine and of its baseline."""

    engine: float
    baseline: float


def compare(engine: Callable[[], object], baseline: Callable[[], object], *, repeat: int) -> Pair:
    """Warm both up once, then time them alternately ``repeat`` times; medians."""
    engine()
    baseline()
    engine_times, baseline_times = [], []
    for _ in range(repeat):
        engine_times.append(_timed(engine))
        baseline_times.append(_timed(baseline))
    return Pair(statistics.median(engine_times), statistics.median(baseline_times))


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


# --- The table --------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One printed line. ``ok`` is None when the row has no target."""

    name: str
    engine_s: float
    baseline_s: float
    ratio: bool = True
    per_step_ms: float | None = None
    target: str = "-"
    ok: bool | None = None


_COLUMNS = (
    ("benchmark", 32),
    ("engine", 12),
    ("baseline", 12),
    ("ratio", 8),
    ("per-step overhead", 20),
    ("target", 9),
)


def format_table(rows: list[Row]) -> str:
    lines = ["".join(title.ljust(width) for title, width in _COLUMNS).rstrip()]
    for row in rows:
        cells = (
            row.name,
            _ms(row.engine_s),
            _ms(row.baseline_s),
            f"{row.engine_s / row.baseline_s:.2f}x" if row.ratio and row.baseline_s else "-",
            "-" if row.per_step_ms is None else f"{row.per_step_ms:.2f} ms",
            row.target,
        )
        verdict = "" if row.ok is None else ("OK" if row.ok else "MISS")
        text = "".join(cell.ljust(width) for cell, (_, width) in zip(cells, _COLUMNS, strict=True))
        lines.append((text + verdict).rstrip())
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def progress(what: str) -> None:
    """What is being measured now, on stderr (the table goes to stdout)."""
    print(f"measuring {what}…", file=sys.stderr, flush=True)
