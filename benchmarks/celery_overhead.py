"""Celery overhead: ``.venv/bin/python benchmarks/celery_overhead.py [--fanout 20] …``.

What a step costs when it goes through Celery + Redis + PostgreSQL instead of the
in-process engine: the same workflows run three ways in one process, against the
same loopback server —

- **plain Python**: the HTTP calls alone (httpx on a thread pool as wide as the
  workers' pool, or one after the other for the chain);
- **in-process engine**: ``run_create`` + ``run_execute`` (threads, checkpoints);
- **Celery**: ``run_create`` + ``run_enqueue`` on two real ``celery worker``
  subprocesses (prefork, ``--concurrency`` each), until the run's ``finished_at``.

Rows: a fan-out of ``--fanout`` x ``--delay-ms`` calls (20 x 100 ms over 2 x 8 by
default) and a chain of ``--chain`` instant calls, where every step waits for the one
before, so its per-step overhead is the full latency of a hop (publish, deliver,
claim, run, settle under the run lock, advance). The per-step overhead is
``(engine - plain) / steps``. The target (< 15 ms) is the fan-out's, the case the
workers are for; the chain's hop latency is shown beside it without one. OK/MISS is
printed, nothing is asserted, the exit status is 0 either way.

Needs PostgreSQL (``--database-url``, a server where the role may create databases: a
throwaway database is made and dropped) and Redis (``--redis-url``; a queue of its own,
removed afterwards). See docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from benchmarks._support import (  # noqa: E402
    LoopbackServer,
    Row,
    compare,
    format_table,
    progress,
    throwaway_database,
)

TARGET_MS = 15.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--fanout", type=int, default=20, help="parallel steps (20)")
    parser.add_argument("--delay-ms", type=int, default=100, help="each call's latency (100)")
    parser.add_argument("--chain", type=int, default=20, help="steps in the chain (20)")
    parser.add_argument("--workers", type=int, default=2, help="celery worker processes (2)")
    parser.add_argument("--concurrency", type=int, default=8, help="pool size of each (8)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs, median (5)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "FLOWPILOT_BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1/flowpilot"
        ),
        help="PostgreSQL server (a throwaway database is created there and dropped)",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("FLOWPILOT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="Redis for broker and results (a queue of its own, removed afterwards)",
    )
    return parser.parse_args(argv)


class Workers:
    """``celery worker`` subprocesses on a queue of their own, against the throwaway database."""

    def __init__(self, *, count: int, concurrency: int, redis_url: str, database_url: str):
        self.queue = f"flowpilot-bench-{uuid.uuid4().hex[:8]}"
        self.redis_url = redis_url
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": redis_url,
            "CELERY_RESULT_BACKEND": redis_url,
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "CELERY_TASK_DEFAULT_QUEUE": self.queue,
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        self.count, self.concurrency = count, concurrency
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def __enter__(self) -> Workers:
        celery = Path(sys.executable).with_name("celery")
        for i in range(1, self.count + 1):
            log = Path(f"/tmp/{self.queue}-w{i}.log")
            with log.open("w") as out:
                proc = subprocess.Popen(
                    [str(celery), "-A", "config", "worker", "-n", f"bench{i}@%h", "-Q",
                     self.queue, "-c", str(self.concurrency), "-P", "prefork",
                     "--prefetch-multiplier", "1", "--without-gossip", "--without-mingle",
                     "--without-heartbeat"],
                    cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            self.procs.append((proc, log))
        for i, (proc, log) in enumerate(self.procs, 1):
            ready = f"bench{i}@{socket.gethostname()} ready."
            deadline = time.monotonic() + 60
            while ready not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {i} did not start:\n{log.read_text()[-2000:]}")
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
        import redis

        client = redis.Redis.from_url(self.redis_url)
        for key in client.scan_iter(match=f"*{self.queue}*"):
            client.delete(key)
        client.close()


# --- the cases (the project's modules are imported after django.setup()) ------------


def store_ping_tool(base_url: str) -> None:
    """The workers load tools from the database: store the loopback tool there."""
    from benchmarks._cases import ping_tool
    from tools.services import tool_upsert

    tool_upsert(spec=ping_tool(base_url), source="benchmarks/celery_overhead.py")


def point_celery_at(redis_url: str, queue: str) -> None:
    from config.celery_app import app

    app.conf.update(
        broker_url=redis_url,
        result_backend=redis_url,
        task_always_eager=False,
        task_default_queue=queue,
    )


def _prepare(definition: dict):
    from workflows.services import workflow_import

    workflow, _ = workflow_import(data=definition)
    return workflow


def _in_process(workflow, parallel: int) -> None:
    from benchmarks._cases import EngineRunner, _limits
    from tools.registry import ToolRegistry

    EngineRunner(ToolRegistry.from_db(), _limits(parallel)).run(workflow)


def _on_celery(workflow) -> float:
    """Enqueue a run; return seconds from before ``run_create`` to its ``finished_at``."""
    from runs.models import Run, RunTrigger
    from runs.services import run_create, run_enqueue

    started = datetime.now(UTC)
    run = run_enqueue(run=run_create(workflow=workflow, trigger=RunTrigger.API))
    deadline = time.monotonic() + 120
    while True:
        status, finished = Run.objects.values_list("status", "finished_at").get(pk=run.pk)
        if finished is not None:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run.pk} is still {status} after 120 s")
        time.sleep(0.005)
    if status != "succeeded":
        raise RuntimeError(f"benchmark run {run.pk} ended {status}")
    return (finished - started).total_seconds()


def _median_celery(workflow, repeat: int) -> float:
    import statistics

    _on_celery(workflow)  # warm-up: pool children open their connections
    return statistics.median(_on_celery(workflow) for _ in range(repeat))


def bench_fanout(base_url: str, *, n: int, delay_ms: int, slots: int, repeat: int) -> list[Row]:
    import httpx

    from benchmarks._cases import fanout_definition

    workflow = _prepare(fanout_definition(n, delay_ms))

    def plain() -> None:
        limits = httpx.Limits(max_connections=slots)
        with httpx.Client(limits=limits) as client, ThreadPoolExecutor(slots) as pool:

            def call(seq: int) -> None:
                params = {"seq": seq, "delay_ms": delay_ms}
                client.get(f"{base_url}/ping", params=params).raise_for_status()

            list(pool.map(call, range(n)))

    local = compare(lambda: _in_process(workflow, slots), plain, repeat=repeat)
    celery = _median_celery(workflow, repeat)
    name = f"fan-out {n} x {delay_ms} ms"
    return [
        _row(f"{name}, in-process", local.engine, local.baseline, n, target=False),
        _row(f"{name}, Celery", celery, local.baseline, n, target=True),
    ]


def bench_chain(base_url: str, *, n: int, repeat: int) -> list[Row]:
    import httpx

    from benchmarks._cases import chain_definition

    workflow = _prepare(chain_definition(n))

    def plain() -> None:
        with httpx.Client() as client:
            value = 0
            for _ in range(n):
                value = client.get(f"{base_url}/ping", params={"seq": value}).json()["n"]

    local = compare(lambda: _in_process(workflow, 8), plain, repeat=repeat)
    celery = _median_celery(workflow, repeat)
    return [
        _row(f"chain {n} x http, in-process", local.engine, local.baseline, n, target=False),
        _row(f"chain {n} x http, Celery (hop)", celery, local.baseline, n, target=False),
    ]


def _row(name: str, engine: float, plain: float, steps: int, *, target: bool) -> Row:
    overhead = (engine - plain) / steps * 1000
    if not target:
        return Row(name, engine, plain, per_step_ms=overhead)
    return Row(
        name, engine, plain, per_step_ms=overhead, target=f"< {TARGET_MS:g} ms",
        ok=overhead < TARGET_MS,
    )  # fmt: skip


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    auth = s["USER"] or "postgres"
    if s["PASSWORD"]:
        auth += f":{s['PASSWORD']}"
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    slots = args.workers * args.concurrency
    with throwaway_database(args.database_url) as where, LoopbackServer() as server:
        store_ping_tool(server.url)
        with Workers(
            count=args.workers,
            concurrency=args.concurrency,
            redis_url=args.redis_url,
            database_url=_database_url(),
        ) as workers:
            point_celery_at(args.redis_url, workers.queue)
            progress(f"fan-out of {args.fanout} x {args.delay_ms} ms")
            rows = bench_fanout(
                server.url, n=args.fanout, delay_ms=args.delay_ms, slots=slots, repeat=args.repeat
            )
            progress(f"chain of {args.chain}")
            rows += bench_chain(server.url, n=args.chain, repeat=args.repeat)
    print(
        f"flowpilot on Celery — {where}; Redis {args.redis_url}; {args.workers} workers x "
        f"concurrency {args.concurrency} (prefork); Python {platform.python_version()}, "
        f"{os.cpu_count()} cores; median of {args.repeat} after one warm-up"
    )
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
