"""How a queued step reaches a worker: the step task's name, publishing, time limits,
queues, leases.

Every module of the Celery path publishes through a ``Publish`` it is given (the
services pass ``publish_step``; tests pass a recorder standing in for the broker), and
dates the leases it writes with ``lease_until``.

Routing: a step's task goes to ``step_queue`` — its tool's ``queue``, else its
workflow's, else the default queue (``CELERY_TASK_DEFAULT_QUEUE``) — so a worker started
with ``-Q heavy`` runs the steps of the tools that name ``heavy``, and a worker without
it never sees them. A policy retry re-publishes the task to the queue it came from
(Celery's ``Task.retry`` keeps the delivery's routing key).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import redis
from celery import current_app

from runs.engine.context import RunContext
from workflows.schema import AnyStep

STEP_TASK = "runs.execute_step"  # the step task's name (``runs.tasks``): never renamed
HARD_LIMIT_GRACE = 10.0  # seconds between a step's soft and hard time limit

# How a queued step reaches a worker:
# ``publish(step_result_id, countdown=, time_limit=, queue=)``.
Publish = Callable[..., None]


def publish_step(
    step_result_id: int,
    *,
    countdown: float = 0.0,
    time_limit: float | None = None,
    queue: str | None = None,
) -> None:
    """Send the step task to the broker (tests inject a recorder instead).

    ``time_limit`` becomes the task's soft time limit; the hard limit follows it.
    ``queue`` (``step_queue``) names the Celery queue; None: the default one.
    """
    options: dict[str, Any] = {"countdown": countdown} if countdown else {}
    if time_limit:
        options.update(soft_time_limit=time_limit, time_limit=time_limit + HARD_LIMIT_GRACE)
    if queue:
        options["queue"] = queue
    current_app.send_task(STEP_TASK, args=[step_result_id], **options)


def step_queue(ctx: RunContext, step: AnyStep) -> str | None:
    """The queue of a step's task: the ``queue`` of the tool it calls by name (a ``tool``
    or ``foreach`` step), else the workflow's ``queue``; None for the default queue.

    An ``llm`` step's task is the workflow's: the tools a model may call run inside it.
    """
    for name in step.direct_tools():
        spec = ctx.registry.get(name)
        if spec is not None and spec.queue:
            return spec.queue
    return ctx.spec.queue


def definition_queue(definition: Any) -> str | None:
    """A stored definition's workflow-level ``queue`` (its run-level tasks go there: a
    child run's start, the settle of a step parked on a child); None for the default."""
    queue = definition.get("queue") if isinstance(definition, dict) else None
    return queue if isinstance(queue, str) and queue else None


def run_task_options(queue: str | None) -> dict[str, Any]:
    """``send_task`` options for a run-level task of a workflow whose queue is ``queue``."""
    return {"queue": queue} if queue else {}


def in_process() -> bool:
    """No broker configured (Celery eager): runs execute in this process, as before."""
    return bool(current_app.conf.task_always_eager)


# A key the sweeper keeps in the broker's Redis database, beside the queues: when it is
# gone, so is everything the broker held (a restart without persistence, a FLUSHDB).
BROKER_MARK = "flowpilot:broker-mark"


def broker_forgot() -> bool:
    """True when the broker lost its messages since the last call: ``BROKER_MARK`` is gone.

    The call leaves the mark (``SET NX``), so one loss is reported once. Only a Redis
    broker can tell; any other broker, in-process execution or an unreachable Redis
    answers False (the queued lease still takes the steps back). The first call ever
    answers True: queued steps are then published once more, which is harmless, since
    a step task claims its step with a conditional UPDATE and a duplicate loses.
    """
    url = str(current_app.conf.broker_url or "")
    if in_process() or not url.startswith(("redis://", "rediss://", "unix://")):
        return False
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        return bool(client.set(BROKER_MARK, "1", nx=True))
    except redis.RedisError:
        return False
    finally:
        client.close()


def lease_until(seconds: float, now: datetime) -> datetime:
    return now + timedelta(seconds=seconds)


def time_limit_of(step: AnyStep) -> float | None:
    """The per-attempt limit enforced as the task's soft time limit.

    A foreach step applies its ``timeout`` to every item call instead.
    """
    return step.step_time_limit()
