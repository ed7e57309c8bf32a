"""Support for the Celery driver's tests: loopback tools, flows, a stand-in broker, real workers.

- ``install_echo(fake)`` adds the routes the test tools call to a ``FakeAPI``;
  ``load_echo_tools(fake)`` stores the tools (``echo``, ``trickle``, ``sink``) pointed at it.
- ``fan_out_flow`` builds N parallel ``echo`` steps joined by a transform.
- ``Gauge`` counts the requests in flight on a loopback route (``load_gauge_tool``, on a
  queue when told; ``gauge_fan_out``, ``gauge_foreach``): what ``max_parallel`` bounds.
- ``Bus`` stands in for the broker in in-process tests: it records what the services
  publish, and ``drain`` delivers each message to ``step_execute`` like a worker would.
- ``require_services`` decides skip / fail for the tests that need real PostgreSQL and
  Redis: they never run on SQLite; under ``CI=true`` an unreachable service fails.
- ``CeleryCluster`` starts real ``celery worker`` (and ``beat``) subprocesses against the
  test database and a queue of their own on Redis, and can ``kill -9`` one of them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pytest

from tests.fakes import FakeAPI, FakeResponse
from tests.startup import start_deadline

REPO_ROOT = Path(__file__).resolve().parent.parent
CELERY = Path(sys.executable).with_name("celery")
# The first of the Redis dbs the tests use: a serial run uses this one; pytest-xdist's
# worker ``gwN`` uses db 12 + N (see ``redis_url``).
DEFAULT_TEST_REDIS = "redis://127.0.0.1:6379/12"
REDIS_DBS = 16  # Redis's default `databases`

FAST_RETRY = {"max_attempts": 3, "initial_delay": 0.05, "max_delay": 0.2, "jitter": 0}


# --- loopback tools -------------------------------------------------------------------


def install_echo(fake: FakeAPI) -> None:
    """Routes: ``GET /echo/{tag}/{name}?delay=s`` answers ``{"tag", "name"}`` after ``s``
    seconds; ``GET /trickle/{tag}`` streams a body slowly (2 s); ``POST /sink/{tag}``
    accepts anything (after ``?delay=s``); ``GET /nul/{tag}`` answers text holding NUL
    characters."""

    def echo(request, match) -> FakeResponse:
        time.sleep(float(request.arg("delay") or 0))
        return FakeResponse.json({"tag": match["tag"], "name": match["name"]})

    def trickle(request, match) -> FakeResponse:
        def chunks():
            yield b'{"tag": "' + match["tag"].encode() + b'", "pad": "'
            for _ in range(20):
                time.sleep(0.1)
                yield b"x"
            yield b'"}'

        return FakeResponse(200, headers={"Content-Type": "application/json"}, stream=chunks())

    def sink(request, match) -> FakeResponse:
        time.sleep(float(request.arg("delay") or 0))
        return FakeResponse.json({"tag": match["tag"], "received": True})

    def nul(request, match) -> FakeResponse:
        return FakeResponse.json(
            {"tag": match["tag"], "text": "a\x00b", "list": ["\x00", "␀"], "k\x00": 1}
        )

    fake.route("echo", "GET", r"/echo/(?P<tag>[^/]+)/(?P<name>[^/]+)", echo)
    fake.route("trickle", "GET", r"/trickle/(?P<tag>[^/]+)", trickle)
    fake.route("sink", "POST", r"/sink/(?P<tag>[^/]+)", sink)
    fake.route("nul", "GET", r"/nul/(?P<tag>[^/]+)", nul)


ECHO_TOOLS = """
- name: echo
  kind: http
  description: Echo a tag and a name back after a delay (loopback fake).
  base_url: "{base}"
  request:
    method: GET
    url: /echo/{{{{tag}}}}/{{{{name}}}}
    query: {{delay: "{{{{delay}}}}"}}
  inputs:
    type: object
    properties:
      tag: {{type: string}}
      name: {{type: string}}
      delay: {{type: number}}
    required: [tag, name, delay]
  timeout: 30
  retry: {retry}
- name: trickle
  kind: http
  description: A body that takes 2 s to arrive (loopback fake).
  base_url: "{base}"
  request: {{method: GET, url: "/trickle/{{{{tag}}}}"}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  timeout: 30
- name: sink
  kind: http
  description: A non-idempotent POST (loopback fake).
  base_url: "{base}"
  request: {{method: POST, url: "/sink/{{{{tag}}}}", body: {{tag: "{{{{tag}}}}"}}}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  idempotent: false
  timeout: 30
- name: slow_sink
  kind: http
  description: A non-idempotent POST answered after a delay (loopback fake).
  base_url: "{base}"
  request:
    method: POST
    url: "/sink/{{{{tag}}}}"
    query: {{delay: "{{{{delay}}}}"}}
    body: {{tag: "{{{{tag}}}}"}}
  inputs:
    type: object
    properties: {{tag: {{type: string}}, delay: {{type: number}}}}
    required: [tag, delay]
  idempotent: false
  timeout: 30
- name: nul_text
  kind: http
  description: A JSON answer holding NUL characters (loopback fake).
  base_url: "{base}"
  request: {{method: GET, url: "/nul/{{{{tag}}}}"}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  timeout: 30
"""


def load_echo_tools(fake: FakeAPI) -> None:
    """Store the loopback tools (needs a django_db mark)."""
    from tools.loader import load_tool_text
    from tools.services import tool_upsert

    text = ECHO_TOOLS.format(base=fake.url, retry=json.dumps(FAST_RETRY))
    for spec in load_tool_text(text, source="tests/celery_support.py"):
        tool_upsert(spec=spec, source="tests/celery_support.py")


def fan_out_flow(name: str, width: int, *, delay: float = 0.0, **echo_step: Any) -> dict:
    """``width`` parallel ``echo`` steps ``s01…`` reading ``$input.tag``, then ``join``."""
    ids = [f"s{i:02d}" for i in range(1, width + 1)]
    steps: list[dict[str, Any]] = [
        {
            "id": sid,
            "kind": "tool",
            "tool": "echo",
            "input_mapping": {"tag": "$input.tag", "name": f"n{sid[1:]}", "delay": delay},
            **echo_step,
        }
        for sid in ids
    ]
    steps.append(
        {
            "id": "join",
            "kind": "transform",
            "expression": "{tags: tags}",
            "input_mapping": {"tags": [f"{sid}.tag" for sid in ids]},
        }
    )
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": steps,
        "outputs": {"tags": "join.tags", "first": "s01.name"},
    }


def import_flow(data: dict):
    from workflows.services import workflow_import

    workflow, _ = workflow_import(data=data)
    return workflow


# --- a gauge of requests in flight, and tools routed to queues -----------------------


class Gauge:
    """A loopback route counting the requests in flight: ``now``, the ``most`` at once,
    and every request's ``tag`` and ``name`` (``GET /gauge/{tag}/{name}?delay=s``
    answers ``{"tag", "name"}`` after ``s`` seconds). What a ``max_parallel`` bound
    promises is read here, on the server's side: it never saw more than N at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.seen: list[tuple[str, str]] = []

    def reset(self) -> None:
        with self._lock:
            self.now, self.most, self.seen = 0, 0, []

    def install(self, fake: FakeAPI) -> None:
        fake.route("gauge", "GET", r"/gauge/(?P<tag>[^/]+)/(?P<name>[^/]+)", self._answer)

    def _answer(self, request, match) -> FakeResponse:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.seen.append((match["tag"], match["name"]))
        try:
            time.sleep(float(request.arg("delay") or 0))
        finally:
            with self._lock:
                self.now -= 1
        return FakeResponse.json({"tag": match["tag"], "name": match["name"]})


GAUGE_TOOL = """
name: {name}
kind: http
description: Counted in flight by the test's gauge (loopback fake).
base_url: "{base}"
request:
  method: GET
  url: /gauge/{{{{tag}}}}/{{{{name}}}}
  query: {{delay: "{{{{delay}}}}"}}
inputs:
  type: object
  properties:
    tag: {{type: string}}
    name: {{type: string}}
    delay: {{type: number}}
  required: [tag, name, delay]
timeout: 30
retry: {retry}
"""


def load_gauge_tool(fake: FakeAPI, name: str = "gauge", *, queue: str | None = None) -> None:
    """Store the tool ``name`` calling the gauge route, on ``queue`` when given."""
    from tools.loader import load_tool_text
    from tools.services import tool_upsert

    text = GAUGE_TOOL.format(name=name, base=fake.url, retry=json.dumps(FAST_RETRY))
    if queue is not None:
        text += f"queue: {queue}\n"
    for spec in load_tool_text(text, source="tests/celery_support.py"):
        tool_upsert(spec=spec, source="tests/celery_support.py")


def gauge_fan_out(name: str, width: int, *, delay: float, tool: str = "gauge") -> dict:
    """``width`` parallel steps ``g01…`` of ``tool`` (the gauge), then ``join``."""
    ids = [f"g{i:02d}" for i in range(1, width + 1)]
    steps: list[dict[str, Any]] = [
        {
            "id": sid,
            "kind": "tool",
            "tool": tool,
            "input_mapping": {"tag": "$input.tag", "name": sid, "delay": delay},
        }
        for sid in ids
    ]
    steps.append(
        {
            "id": "join",
            "kind": "transform",
            "expression": "{names: names}",
            "input_mapping": {"names": [f"{sid}.name" for sid in ids]},
        }
    )
    return {"name": name, "inputs": {"tag": {"type": "string"}}, "steps": steps}


def gauge_foreach(name: str, *, delay: float, **bound: int) -> dict:
    """One ``foreach`` step calling the gauge once per item of the run input ``items``
    (``bound``: ``max_parallel=N`` or ``concurrency=N``)."""
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}, "items": {"type": "array"}},
        "steps": [
            {
                "id": "each",
                "kind": "foreach",
                "tool": "gauge",
                "input_mapping": {
                    "items": "$input.items",
                    "tag": "$input.tag",
                    "delay": delay,
                },
                "item_mapping": {"name": "$item"},
                **bound,
            }
        ],
        "outputs": {"count": "each.count"},
    }


# --- a stand-in broker ----------------------------------------------------------------


@dataclass
class Message:
    step_result_id: int
    countdown: float = 0.0
    time_limit: float | None = None
    queue: str | None = None  # None: the default queue


@dataclass
class Bus:
    """Records published step tasks; ``drain`` delivers them to ``step_execute`` in order."""

    messages: list[Message] = field(default_factory=list)
    published: list[Message] = field(default_factory=list)

    def __call__(
        self,
        step_result_id: int,
        *,
        countdown: float = 0.0,
        time_limit: float | None = None,
        queue: str | None = None,
    ) -> None:
        message = Message(step_result_id, countdown, time_limit, queue)
        self.messages.append(message)
        self.published.append(message)

    def drain(self, *, worker: str = "test@local", limit: int = 500) -> list:
        """Deliver until nothing is queued; a retry verdict is published again.

        Returns every step's verdict, those a task ran after its own (a chain continued
        in the task, ``Verdict.continued``) included, in the order they ran.
        """
        from runs.engine.celery.step import step_execute
        from runs.replay.recorder import call_recorder_for

        verdicts = []
        while self.messages and len(verdicts) < limit:
            message = self.messages.pop(0)
            verdict = step_execute(
                step_result_id=message.step_result_id,
                worker=worker,
                publish=self,
                taps_for=call_recorder_for,  # as the task passes it (``runs.tasks``)
            )
            verdicts += [verdict, *verdict.continued]
            if verdict.retry_in is not None:  # back to its queue, as ``Task.retry`` does
                self(message.step_result_id, countdown=verdict.retry_in, queue=message.queue)
        return verdicts


# --- services -------------------------------------------------------------------------


def ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or default_port), 3
        ):
            return True
    except OSError:
        return False


def redis_url() -> str:
    """The Redis db of this test process (``FLOWPILOT_TEST_REDIS_URL``, default db 12).

    Under pytest-xdist each worker has a db of its own, so no worker consumes another's
    Celery messages, answers its broadcasts or loses its keys to a FLUSHDB."""
    base = os.environ.get("FLOWPILOT_TEST_REDIS_URL", DEFAULT_TEST_REDIS)
    return worker_redis_url(base, os.environ.get("PYTEST_XDIST_WORKER", ""))


def worker_redis_url(base: str, worker: str) -> str:
    """``base`` with its db moved up by the xdist worker's number (``gw2``: db + 2)."""
    if not worker:
        return base
    parsed = urlparse(base)
    path = parsed.path.strip("/")
    db = (int(path) if path else 0) + int(worker.removeprefix("gw"))
    if db >= REDIS_DBS:
        raise ValueError(
            f"xdist worker {worker} would use Redis db {db} of {base} (FLOWPILOT_TEST_REDIS_URL)"
            f", past db {REDIS_DBS - 1}: start the tests' dbs lower or run fewer workers"
        )
    return parsed._replace(path=f"/{db}").geturl()


def require_services() -> None:
    """Skip on SQLite; skip (or, under CI=true, fail) when PostgreSQL or Redis is down."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip(
            "Celery worker tests need PostgreSQL shared with the worker processes; this "
            "pass runs on SQLite (`python -m tests` runs them on its PostgreSQL pass)"
        )
    settings = connection.settings_dict
    pg = f"postgres://{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
    for label, url, port in (("PostgreSQL", pg, 5432), ("Redis", redis_url(), 6379)):
        if not _reachable(url, port):
            message = f"{label} at {url} is unreachable"
            if ci():
                pytest.fail(f"{message}, and CI=true requires it")
            pytest.skip(f"{message} (required when CI=true)")


def worker_database_url() -> str:
    """The URL of the database this test process uses (pytest-django's ``test_<name>``)."""
    from django.db import connection

    s = connection.settings_dict
    auth = quote(s["USER"] or "postgres")
    if s["PASSWORD"]:
        auth += ":" + quote(s["PASSWORD"])
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


# --- real workers ---------------------------------------------------------------------


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None


class CeleryCluster:
    """Real ``celery worker``/``beat`` subprocesses on a queue of their own.

    Each process is started in its own session, so ``kill`` (SIGKILL to the process
    group) takes its pool children with it, like a lost machine.
    """

    def __init__(self, *, log_dir: Path, env: dict[str, str], queue: str) -> None:
        self.log_dir = log_dir
        self.env = env
        self.queue = queue
        self.processes: dict[str, Process] = {}
        self.hostname = socket.gethostname()

    def node(self, name: str) -> str:
        return f"{name}@{self.hostname}"

    def start_worker(
        self,
        name: str,
        *,
        concurrency: int = 4,
        env: dict[str, str] | None = None,
        queues: tuple[str, ...] | None = None,
    ) -> Process:
        """Start ``name`` (``env``: variables to set for this worker only; ``queues``: the
        queues it consumes, else the cluster's own)."""
        consumed = ",".join(queues or (self.queue,))
        args = [
            "worker", "-n", f"{name}@%h", "-Q", consumed, "-c", str(concurrency),
            "-P", "prefork", "--prefetch-multiplier", "1", "--without-gossip",
            "--without-mingle", "--without-heartbeat", "-l", "INFO",
        ]  # fmt: skip
        return self._start(name, args, ready=f"{self.node(name)} ready.", env=env)

    def start_beat(self, name: str = "beat", *, env: dict[str, str] | None = None) -> Process:
        """Start a beat (``env``: variables to set for it only)."""
        schedule = self.log_dir / f"{name}-schedule"
        args = ["beat", "-l", "INFO", "-s", str(schedule)]
        return self._start(name, args, ready="beat: Starting...", env=env)

    def _start(
        self, name: str, args: list[str], *, ready: str, env: dict[str, str] | None = None
    ) -> Process:
        self.stop(name)
        log = self.log_dir / f"{name}.log"
        with log.open("w") as out:
            popen = subprocess.Popen(
                [str(CELERY), "-A", "config", *args],
                cwd=REPO_ROOT,
                env={**self.env, **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = Process(name, popen, log)
        self.processes[name] = process
        deadline = time.monotonic() + start_deadline(starts=2)  # and its pool
        while ready not in process.output():
            if not process.alive or time.monotonic() > deadline:
                self.stop(name)
                raise RuntimeError(f"celery {name} did not start:\n{process.output()[-3000:]}")
            time.sleep(0.1)
        return process

    def kill(self, name: str) -> None:
        """``kill -9`` the process and its pool children."""
        process = self.processes[name]
        os.killpg(process.popen.pid, signal.SIGKILL)
        process.popen.wait(timeout=10)

    def stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is None or not process.alive:
            return
        os.killpg(process.popen.pid, signal.SIGTERM)
        try:
            process.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.popen.pid, signal.SIGKILL)
            process.popen.wait(timeout=10)

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.output()[-4000:]}" for p in self.processes.values())

    def warnings(self) -> str:
        """Every process's WARNING and ERROR lines, whole (what a failed assertion about
        a fault should show: the sweeper's, the heartbeat's and the retries' lines)."""
        return "\n".join(
            f"--- {p.name} ---\n"
            + "\n".join(
                line for line in p.output().splitlines() if " WARNING " in line or " ERROR " in line
            )
            for p in self.processes.values()
        )


def purge_queue(url: str, queue: str) -> None:
    """Remove this session's queue from Redis, and unacknowledged messages bound for it."""
    import redis

    client = redis.Redis.from_url(url)
    for key in client.scan_iter(match=f"*{queue}*"):
        client.delete(key)
    for tag, raw in client.hgetall("unacked").items():
        try:
            routing_key = json.loads(raw)[2]
        except (ValueError, IndexError, TypeError):
            continue
        if routing_key == queue:
            client.hdel("unacked", tag)
            client.zrem("unacked_index", tag)
    client.close()


def new_queue_name() -> str:
    return f"flowpilot-test-{uuid.uuid4().hex[:10]}"


def wait_until(predicate: Callable[[], Any], *, timeout: float, what: str, interval=0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


WORKER_SETTINGS = {
    "FLOWPILOT_STEP_LEASE": "3",  # heartbeats every second; a late one is not a lost worker
    "FLOWPILOT_QUEUED_LEASE": "10",
    "FLOWPILOT_SWEEP_INTERVAL": "1",
}


def worker_env(*, url: str, queue: str) -> dict[str, str]:
    """The environment a test's Celery worker process runs with: the shared PostgreSQL
    database, Redis at ``url`` as broker and backend, its own ``queue``, INFO logs (the
    "ready." line is an INFO record) and the test settings."""
    return {
        "DATABASE_URL": worker_database_url(),
        "CELERY_BROKER_URL": url,
        "CELERY_RESULT_BACKEND": url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "INFO",
        **WORKER_SETTINGS,
    }


@contextmanager
def start_cluster(
    log_dir: Path,
    workers: tuple[str, ...] = ("w1", "w2"),
    *,
    concurrency: int = 4,
    env: dict[str, str] | None = None,
) -> Iterator[CeleryCluster]:
    """Point this process's Celery app at Redis and a fresh queue; start ``workers``
    (``w1`` and ``w2`` unless told: prefork, ``concurrency`` 4 unless told; ``env``:
    more variables for every worker)."""
    from config.celery_app import app

    require_services()
    url, queue = redis_url(), new_queue_name()
    env = {
        **os.environ,
        **worker_env(url=url, queue=queue),
        "CELERY_RESULT_EXPIRES": "600",  # the sweeper's results, sent every second here
        **(env or {}),
    }
    keys = ("broker_url", "result_backend", "task_always_eager", "task_default_queue")
    saved = {key: app.conf[key] for key in keys}
    app.conf.update(
        broker_url=url, result_backend=url, task_always_eager=False, task_default_queue=queue
    )
    cluster = CeleryCluster(log_dir=log_dir, env=env, queue=queue)
    try:
        for name in workers:
            cluster.start_worker(name, concurrency=concurrency)
        yield cluster
    finally:
        cluster.stop_all()
        app.conf.update(saved)
        purge_queue(url, queue)
