"""Two worker processes share one breaker: each sees it open after failures the other
caused, and after the cool-down exactly one of them gets the trial. Real processes,
real Redis or PostgreSQL, a loopback server answering 503."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from django.db import connection

from tests.celery_support import REPO_ROOT, redis_url, worker_database_url
from tests.tools.breaker.conftest import redis_client
from tests.tools.conftest import Reply
from tools.breaker.core import breaker_host
from tools.breaker.db_store import DatabaseBreakerStore
from tools.breaker.redis_store import RedisBreakerStore

UNAVAILABLE = Reply.json({"message": "down"}, 503)


def backend_env(backend: str) -> dict[str, str]:
    env = {
        **os.environ,
        "FLOWPILOT_BREAKER_BACKEND": backend,
        "FLOWPILOT_BREAKER_FAILURES": "3",
        "FLOWPILOT_BREAKER_COOLDOWN": "2",
        "PYTHONPATH": str(REPO_ROOT),
    }
    if backend == "redis":
        env["FLOWPILOT_BREAKER_REDIS_URL"] = redis_url()
    else:
        env["DATABASE_URL"] = worker_database_url()
    return env


class Worker:
    """A worker process (``worker_process``) kept running between calls."""

    def __init__(self, server, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.tools.breaker.worker_process", server.url],
            env=env,
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._line() == "ready"

    def _line(self) -> str:
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            _, err = self.process.communicate(timeout=10)
            raise AssertionError(f"the worker process ended: {err}")
        return line.strip()

    def send(self, calls: int, start_at: float | None = None) -> None:
        command = f"{calls} {start_at!r}" if start_at is not None else str(calls)
        self.process.stdin.write(command + "\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]

    def result(self) -> list[str]:
        return json.loads(self._line())

    def call(self, calls: int) -> list[str]:
        self.send(calls)
        return self.result()

    def stop(self) -> None:
        self.process.communicate(timeout=30)


@pytest.fixture(params=["redis", "database"])
def shared(request, server):
    """The backend's environment for the worker processes, and its store here."""
    if request.param == "redis":
        store = RedisBreakerStore(redis_client())
    else:
        if connection.vendor != "postgresql":
            pytest.skip("worker processes share the database on the PostgreSQL pass only")
        store = DatabaseBreakerStore()
    yield backend_env(request.param), store
    store.reset([breaker_host(server.url)])
    store.close()


@pytest.fixture
def workers(server, shared):
    env, _ = shared
    started = [Worker(server, env), Worker(server, env)]
    yield started
    for worker in started:
        worker.stop()


def ours(store, host: str) -> list:
    """The states of this test's host only: the shared store may hold others'."""
    return [state for state in store.states() if state.host == host]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_two_processes_see_one_breaker(server, shared, workers):
    _, store = shared
    a, b = workers
    server.reply(UNAVAILABLE)
    assert a.call(2) == ["http_error", "http_error"]  # failures 1, 2
    assert b.call(2) == ["http_error", "circuit_open"]  # 3 opens it
    assert a.call(1) == ["circuit_open"]  # open for A too, by B's failure
    assert len(server.requests) == 3
    host = breaker_host(server.url)
    [state] = ours(store, host)  # the Redis store is shared with every other test run
    assert (state.host, state.state, state.failures) == (host, "open", 3)

    time.sleep(2.1)  # the cool-down passes: both race for the half-open trial
    server.reply(Reply(status=503, body=b"still down", delay=0.5))  # a slow trial
    at = time.time() + 0.3
    a.send(1, at)
    b.send(1, at)
    assert sorted([*a.result(), *b.result()]) == ["circuit_open", "http_error"]
    assert len(server.requests) == 4  # exactly one trial reached the server
    assert a.call(1) == ["circuit_open"]  # the failed trial opened it again

    time.sleep(2.1)
    server.reply(Reply.json({"ok": True}))
    assert b.call(1) == ["ok"]  # the trial succeeds: closed
    assert ours(store, host) == []
    assert a.call(2) == ["ok", "ok"]
