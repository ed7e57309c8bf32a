"""Raw Celery: the benchmark's floor for a distributed step (``benchmarks/compare.py``).

The same HTTP call flowpilot's ``bench_ping`` tool makes, as one plain Celery task,
on the same broker, with the same worker flags and task settings as flowpilot's step
task (``acks_late``, prefetch 1, JSON): what Celery itself costs per task, with no
database, checkpoint or workflow engine. A chain is a Celery ``chain`` (each task's
result is the next one's ``seq``, published by the worker that finished the task
before), a fan-out a ``group``.

Configured from the environment (the harness sets it for the workers and itself):
``RAW_CELERY_BROKER``, ``RAW_CELERY_QUEUE``. Never imports Django.
"""

from __future__ import annotations

import os

import httpx
from celery import Celery

app = Celery("flowpilot_raw_bench", set_as_current=False)  # flowpilot's app stays current
app.conf.update(
    broker_url=os.environ.get("RAW_CELERY_BROKER", "redis://127.0.0.1:6379/14"),
    result_backend=os.environ.get("RAW_CELERY_BROKER", "redis://127.0.0.1:6379/14"),
    task_default_queue=os.environ.get("RAW_CELERY_QUEUE", "flowpilot-raw-bench"),
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=600,
    broker_connection_retry_on_startup=True,
)

_client: httpx.Client | None = None  # one per worker process, like flowpilot's per run


@app.task(name="bench.ping")
def ping(seq: int, base_url: str, delay_ms: int = 0) -> int:
    """``GET {base_url}/ping?seq=…&delay_ms=…`` and return the answer's ``n``."""
    global _client
    if _client is None:
        _client = httpx.Client(timeout=10)
    params = {"seq": seq, "delay_ms": delay_ms} if delay_ms else {"seq": seq}
    response = _client.get(f"{base_url}/ping", params=params)
    response.raise_for_status()
    return int(response.json()["n"])
