"""Real Celery workers for the benchmarks, and this process's Celery app pointed at them.

``Workers`` starts ``celery worker`` subprocesses on a queue of their own (against
the throwaway database) and removes the queue afterwards; ``point_celery_at`` makes
this process publish flowpilot's step tasks to that queue; ``database_url`` is the
database this process uses, for the workers. Used by the Celery section of
``benchmarks/compare.py`` (run by ``benchmarks/_children.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent


class Workers:
    """``celery worker`` subprocesses on a queue of their own, against the throwaway database."""

    def __init__(
        self,
        *,
        count: int,
        concurrency: int,
        redis_url: str,
        database_url: str,
        app: str = "config",
        name: str = "bench",
    ):
        """``app`` is flowpilot's (``config``) or another that needs no Django
        (``benchmarks.raw_celery``): then the workers get no Django settings."""
        self.queue = f"flowpilot-{name}-{uuid.uuid4().hex[:8]}"
        self.redis_url = redis_url
        self.app, self.name = app, name
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": redis_url,
            "CELERY_RESULT_BACKEND": redis_url,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "CELERY_TASK_DEFAULT_QUEUE": self.queue,
            "RAW_CELERY_BROKER": redis_url,  # benchmarks/raw_celery.py
            "RAW_CELERY_QUEUE": self.queue,
            "PYTHONPATH": str(ROOT),
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        if app != "config":  # else Celery's Django fixup would set Django up in them
            for name_ in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL"):
                self.env.pop(name_, None)
        self.count, self.concurrency = count, concurrency
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def __enter__(self) -> Workers:
        celery = Path(sys.executable).with_name("celery")
        for i in range(1, self.count + 1):
            log = Path(f"/tmp/{self.queue}-w{i}.log")
            with log.open("w") as out:
                proc = subprocess.Popen(
                    [str(celery), "-A", self.app, "worker", "-n", f"{self.name}{i}@%h", "-Q",
                     self.queue, "-c", str(self.concurrency), "-P", "prefork", "-l", "INFO",
                     "--prefetch-multiplier", "1", "--without-gossip", "--without-mingle",
                     "--without-heartbeat"],
                    cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            self.procs.append((proc, log))
        for i, (proc, log) in enumerate(self.procs, 1):
            ready = f"{self.name}{i}@{socket.gethostname()} ready."
            deadline = time.monotonic() + 60
            while ready not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    text = log.read_text(errors="replace")[-2000:]
                    self.__exit__()
                    raise RuntimeError(f"worker {i} did not start:\n{text}")
                time.sleep(0.1)
        return self

    def __exit__(self, *exc) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, log in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            log.unlink(missing_ok=True)
        client = redis.Redis.from_url(self.redis_url)
        for key in client.scan_iter(match=f"*{self.queue}*"):
            client.delete(key)
        client.close()


# --- this process's side (the project's modules are imported after django.setup()) --


def point_celery_at(redis_url: str, queue: str) -> None:
    """Publish flowpilot's step tasks to ``queue`` on Redis (not eagerly in process)."""
    from config.celery_app import app

    app.conf.update(
        broker_url=redis_url,
        result_backend=redis_url,
        task_always_eager=False,
        task_default_queue=queue,
    )


def database_url() -> str:
    """The URL of the database this process uses, for the workers."""
    from django.db import connection

    s = connection.settings_dict
    auth = s["USER"] or "postgres"
    if s["PASSWORD"]:
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


# --- what the worker benchmarks share (triggers.py, approvals.py) -----------------


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """``--concurrency``, ``--database-url`` (a PostgreSQL server: a throwaway database
    is made on it) and ``--redis-url`` (the broker)."""
    parser.add_argument("--concurrency", type=int, default=4, help="worker pool processes (4)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "FLOWPILOT_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"
        ),
        help="a PostgreSQL server (a throwaway database is made on it)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("FLOWPILOT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="the broker",
    )


def percentile(values: list[float], share: float) -> float:
    """The value at ``share`` (0.95: the 95th percentile) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def broker_messages(redis_url: str, queue: str) -> int:
    """Messages the broker holds for ``queue``: waiting in its lists (every priority) or
    delivered and not yet acknowledged (a task a worker holds)."""
    client = redis.Redis.from_url(redis_url)
    try:
        waiting = sum(
            client.llen(key) for key in client.scan_iter(match=f"{queue}*")
            if client.type(key) == b"list"
        )  # fmt: skip
        held = 0
        for raw in client.hgetall("unacked").values():
            try:
                held += json.loads(raw)[2] == queue
            except (ValueError, IndexError, TypeError):
                continue
        return waiting + held
    finally:
        client.close()
