"""A Celery run's start, and the context each of its tasks builds.

``run_start`` moves a pending run to running and queues its first ready steps in one
transaction (``advance.advance_locked``); the step tasks are published when it commits.
``run_context`` is the fresh context of one task of a run; the plan and the tool
registry come from this process's caches, keyed by what the task read beside its row
(``TOOLS_KEY``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import Func, Subquery
from kombu.exceptions import OperationalError as KombuOperationalError

from runs.engine import caches
from runs.engine.build import build_run_context
from runs.engine.celery.advance import advance_locked
from runs.engine.celery.broker import Publish, publish_step
from runs.engine.context import CallTaps, RunContext
from runs.models import Run
from runs.state import RunError, RunStateError, RunStatus, run_transition
from tools.models import Tool
from workflows.services import workflow_spec

logger = logging.getLogger("flowpilot.engine")

# The taps of a run's tool and model calls, by run: ``runs.tasks`` passes the replay
# recorder's ``call_recorder_for`` (a validation run records its calls). Passed in,
# because ``runs.replay`` builds on the engine: the engine never imports it.
TapsFor = Callable[[Run], CallTaps | None]


def run_context(
    run: Run, *, tools_key: tuple | None = None, taps_for: TapsFor | None = None
) -> RunContext:
    """A fresh context for one task of ``run`` (its own redactor and HTTP client), with
    the taps ``taps_for`` gives (None: a task that makes no tool or model call).

    The compiled plan (by the version's hash: a version never changes) and the tool
    registry (by the tool table's state, ``tools_key``) come from this process's caches
    (``runs.engine.caches``): building a registry validates every built-in schema,
    more than a step task's own work.
    """
    return build_run_context(
        run_id=run.pk,
        run_uuid=str(run.uuid),
        plan=caches.plan_for_version(run.definition_hash, lambda: workflow_spec(run.workflow)),
        registry=caches.registry_for(caches.tools_state() if tools_key is None else tools_key),
        taps=None if taps_for is None else taps_for(run),
    )


# The Tool table's state, read beside the step row (no extra round trip): the newest
# update, the number of rows and of enabled rows.
TOOLS_KEY = {
    "tools_updated": Subquery(Tool.objects.order_by("-updated_at").values("updated_at")[:1]),
    "tools_count": Subquery(
        Tool.objects.order_by().annotate(n=Func("pk", function="COUNT")).values("n")
    ),
    "tools_enabled": Subquery(
        Tool.objects.filter(enabled=True)
        .order_by()
        .annotate(n=Func("pk", function="COUNT"))
        .values("n")
    ),
}


def tools_key(row: Any = None) -> tuple:
    """The Tool table's state (``caches.tools_state``), from a row annotated with
    ``TOOLS_KEY`` (read beside the step row, no extra round trip), or queried."""
    if row is not None:
        return caches.state_key(row.tools_updated, row.tools_count, row.tools_enabled or 0)
    return caches.tools_state()


def lock_run(run_id: int) -> Run:
    """The run, row-locked until the transaction ends."""
    return Run.objects.select_for_update().get(pk=run_id)


class BrokerUnavailable(RunError):
    code = "broker_unavailable"


def run_start(*, run: Run, publish: Publish = publish_step) -> Run:
    """Move a pending run to running and queue its first steps (published on commit).

    Raises ``BrokerUnavailable`` when the broker refuses the steps: the run is started
    and its steps queued by then, so the sweeper publishes them again later.
    """
    try:
        with transaction.atomic():
            locked = lock_run(run.pk)
            with run_context(locked) as ctx:
                now = ctx.now()
                started = locked.started_at or now
                if not run_transition(locked, RunStatus.RUNNING, started_at=started):
                    raise RunStateError(f"run {locked.pk} is {locked.status}; it cannot start")
                advance_locked(ctx, locked, publish=publish, now=now)
    except KombuOperationalError as exc:
        raise BrokerUnavailable(
            f"run {run.pk} started, but its steps could not be sent to the broker ({exc}); "
            "the sweeper sends them again once the broker is back, or cancel it with "
            f"`manage.py cancelrun {run.pk}`"
        ) from exc
    logger.info("run %s started on the Celery workers", run.pk)
    return locked
