"""Queue a Celery task, or call it here when there is no broker.

Without a broker Celery runs in eager mode, yet ``apply_async`` still opens a
producer on the (unset) broker URL and keeps it cached in the app; calling the task's
body directly is what eager mode means anyway, and keeps the app clean. The same
rule as ``run_enqueue``: with a broker, a worker does it; without, this process.
"""

from __future__ import annotations

from typing import Any

from celery import Task

from runs.engine.celery.broker import in_process


def task_send(task: Task, *args: Any, countdown: float = 0.0) -> None:
    """Send ``task(*args)`` to the workers (after ``countdown`` s), or run it now in process."""
    if in_process():
        task(*args)
    elif countdown > 0:
        task.apply_async(args=args, countdown=countdown)
    else:
        task.apply_async(args=args)
