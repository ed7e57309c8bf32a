"""The measurements of ``benchmarks/compare.py``, each run in a child process of its own.

Imported only after ``django.setup()`` (``_support.throwaway_database``). Every
flowpilot measurement goes through the public services a user calls — ``run_create``
then ``run_execute`` (in process) or ``run_enqueue`` (Celery) — with the loopback
``bench_ping`` tool stored in the database like any tool, so the fixed per-run costs
(the tool registry, validation, the run's rows) are in the figures. Each baseline makes
the same HTTP calls: plain Python (httpx, sequential for a chain, a thread pool as wide
as the slots otherwise) and raw Celery (``benchmarks.raw_celery``, one task per call).
"""

from __future__ import annotations

import gc
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx
from celery import chain as celery_chain
from celery import group as celery_group
from django.conf import settings
from django.db import connection

from benchmarks._cases import _tls, chain_definition, fanout_definition, ping_tool
from benchmarks.raw_celery import ping
from runs.models import Run, RunStatus, RunTrigger
from runs.services import run_create, run_enqueue, run_execute
from tools.services import tool_upsert
from workflows.models import Workflow
from workflows.services import workflow_import

RUN_TIMEOUT = 600.0
POLL = 0.005  # seconds between looks at a finished run / Celery result, both sides alike


def store_tool(base_url: str) -> None:
    tool_upsert(spec=ping_tool(base_url), source="benchmarks/compare.py")


def shape(kind: str, n: int, delay_ms: int = 0) -> dict[str, Any]:
    """``chain``: n calls, each sending the previous answer; ``wide``: n independent calls."""
    if kind == "chain":
        return chain_definition(n)
    return fanout_definition(n, delay_ms)


def prepare(definition: dict[str, Any]) -> Workflow:
    workflow, _ = workflow_import(data=definition)
    return workflow


# --- plain Python -------------------------------------------------------------------


def plain(base_url: str, kind: str, n: int, *, delay_ms: int, slots: int) -> Callable[[], None]:
    """The same calls with httpx: one after the other (chain) or on ``slots`` threads.

    One client for every run of the figure, its connections kept from one run to the
    next, as flowpilot's in-process runs share the process's client
    (``runs.engine.http.process_http_client``); one TLS context per process, as flowpilot.
    """
    limits = httpx.Limits(max_connections=slots if kind != "chain" else None)
    client = httpx.Client(limits=limits, verify=_tls())

    def chain() -> None:
        value = 0
        for _ in range(n):
            value = client.get(f"{base_url}/ping", params={"seq": value}).json()["n"]
        if value != n:
            raise RuntimeError(f"the plain chain ended with n={value}, expected {n}")

    def wide() -> None:
        with ThreadPoolExecutor(slots) as pool:

            def call(seq: int) -> None:
                params = {"seq": seq, "delay_ms": delay_ms}
                client.get(f"{base_url}/ping", params=params).raise_for_status()

            list(pool.map(call, range(n)))

    return chain if kind == "chain" else wide


# --- flowpilot ----------------------------------------------------------------------


def in_process(workflow: Workflow) -> Callable[[], None]:
    """``run_create`` + ``run_execute``: what ``manage.py runflow`` does."""

    def run() -> None:
        done = run_execute(run=run_create(workflow=workflow, trigger=RunTrigger.CLI))
        if done.status != RunStatus.SUCCEEDED:
            raise RuntimeError(f"benchmark run {done.pk} ended {done.status}: {done.error_summary}")

    return run


def warm_celery(workflow: Workflow, slots: int) -> None:
    """``slots`` runs at once, so every pool process of the worker has met the workflow
    (its parsed definition, the tool registry, its connections) before timing: a warm-up
    of one run would warm one process of eight."""
    runs = [
        run_enqueue(run=run_create(workflow=workflow, trigger=RunTrigger.API)) for _ in range(slots)
    ]
    deadline = time.monotonic() + RUN_TIMEOUT
    pks = [run.pk for run in runs]
    while Run.objects.filter(pk__in=pks, finished_at__isnull=True).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"warm-up runs {pks} still running after {RUN_TIMEOUT:g} s")
        time.sleep(POLL)


def on_celery(workflow: Workflow) -> Callable[[], float]:
    """``run_create`` + ``run_enqueue``; returns seconds from before ``run_create`` to the
    run's ``finished_at`` (this process polls the database every 5 ms)."""

    # A plain statement: this process, the database and the workers share the cores, and
    # the ORM would build the same query anew for every look (raw Celery's look is a
    # Redis read).
    poll = f"SELECT status, finished_at FROM {Run._meta.db_table} WHERE id = %s"

    def run() -> float:
        started = datetime.now(UTC)
        run = run_enqueue(run=run_create(workflow=workflow, trigger=RunTrigger.API))
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            with connection.cursor() as cursor:
                cursor.execute(poll, [run.pk])
                status, finished = cursor.fetchone()
            if finished is not None:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"run {run.pk} is still {status} after {RUN_TIMEOUT:g} s")
            time.sleep(POLL)
        if status != RunStatus.SUCCEEDED:
            raise RuntimeError(f"benchmark run {run.pk} ended {status}")
        return (finished - started).total_seconds()

    return run


# --- raw Celery ---------------------------------------------------------------------


def raw_celery(base_url: str, kind: str, n: int, *, delay_ms: int) -> Callable[[], None]:
    """The same calls as raw Celery tasks: a ``chain`` of n, or a ``group`` of n."""

    def run() -> None:
        if kind == "chain":
            flow = celery_chain(ping.s(0, base_url), *(ping.s(base_url) for _ in range(n - 1)))
            got = flow.apply_async().get(timeout=RUN_TIMEOUT, interval=POLL)
            if got != n:
                raise RuntimeError(f"the raw Celery chain ended with n={got}, expected {n}")
        else:
            flow = celery_group(ping.s(i, base_url, delay_ms) for i in range(n))
            flow.apply_async().get(timeout=RUN_TIMEOUT, interval=POLL)

    return run


def point_raw_at(redis_url: str, queue: str) -> None:
    ping.app.conf.update(broker_url=redis_url, result_backend=redis_url, task_default_queue=queue)


# --- timing -------------------------------------------------------------------------


def median_of(fn: Callable[[], Any], repeat: int, *, warm: bool = True) -> float:
    """Warm up once, then the median of ``repeat`` runs; ``fn`` may return its own time."""
    if warm:
        fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        own = fn()
        times.append(own if isinstance(own, float) else time.perf_counter() - started)
    return statistics.median(times)


def heap_peak_mb(fn: Callable[[], Any]) -> float:
    """The peak of what ``fn`` allocates on the Python heap (``tracemalloc``), in MiB.

    Unlike the process's peak RSS, it does not depend on what earlier runs freed for
    the allocator to reuse, nor on SQLite's page cache: the engine's own memory."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / (1024 * 1024)
    finally:
        tracemalloc.stop()


def peak_rss_mb() -> float:
    """This process's peak resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def set_slots(slots: int) -> None:
    """The in-process driver's thread pool, as wide as the Celery worker's pool."""
    settings.FLOWPILOT_MAX_PARALLEL_STEPS = slots
