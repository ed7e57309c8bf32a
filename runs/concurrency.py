"""Concurrency limits: at most ``max_runs`` runs of a workflow at once, per key value.

A workflow's ``concurrency`` block (``workflows.schema_concurrency``) names a pool of
slots per value of its ``key`` input (or one pool for the workflow). A run **holds a
slot** while it is pending or running (``RUN_HOLDING_SLOT``); the slots of a pool are
counted in the database, across every version of the workflow, so every process and
worker sees the same count and nothing is kept in memory between runs.

- **Admission** (``admit``, from ``runs.services.run_create``, the one place every
  entry point — admin, REST API, management commands, schedules, webhooks, restarts,
  repeats — creates a run): under the pool's lock, the run is created pending when a
  slot is free, else queued, skipped or failed (``on_limit``). A child run of a
  `workflow` step is not limited (it is part of its parent run, which already holds a
  slot: queueing it behind its own parent's pool could wait forever), nor is a
  validation run or a replay (neither is a live run).
- **Promotion** (``slots_fill``): when a run of the pool ends (every terminal path
  announces it: ``runs.hooks`` queues ``runs.fill_slots`` on Celery; in process the
  driver fills the slot itself), the oldest queued runs of the pool (by creation
  order: first in, first out per key) move to pending, as many as slots are free, and
  on Celery are started in the same transaction, so a promotion is never lost between
  the two. A lost ``runs.fill_slots`` message (a worker killed before it ran) is
  recovered by the periodic ``queued_sweep`` (Celery beat), which fills every pool
  with queued runs: the queue is rows, so it survives worker and beat restarts.

The lock: on PostgreSQL a transaction-level advisory lock on the (workflow, key) pair,
so two processes admitting or promoting runs of one pool at the same instant take
turns, and pools never wait on each other; on SQLite the database's single write lock,
taken by a write before the count.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connections, router, transaction
from django.db.models import QuerySet
from django.utils import timezone

from runs.engine.celery.run import run_start
from runs.engine.finish import MAX_SUMMARY_CHARS, run_finished_announce
from runs.models import Run
from runs.state import RUN_HOLDING_SLOT, RunStatus, RunTrigger, run_transition
from workflows.schema import WorkflowSpec
from workflows.schema_concurrency import Concurrency
from workflows.services import workflow_spec

logger = logging.getLogger("flowpilot.runs")

MAX_KEY_CHARS = 255  # the column's width; a longer value is stored as its digest
# Triggers whose runs are never limited: not live runs, or part of a limited parent run.
UNLIMITED_TRIGGERS = frozenset({RunTrigger.VALIDATION, RunTrigger.REPLAY, RunTrigger.WORKFLOW})
# The queued runs read per batch while filling a pool (only as many as slots are free).
_FILL_BATCH = 100

# Starts a promoted run on the workers (``runs.engine.celery.run.run_start``); None: the
# caller executes the promoted runs in its own process once the promotion committed.
Starter = Callable[[Run], Any]


def start_on_workers(run: Run) -> None:
    """The Celery ``Starter``: a promoted run's steps are queued, published on commit."""
    run_start(run=run)


@dataclass(frozen=True)
class Admission:
    """What a new run's admission decided: its first status, and why when not pending."""

    status: str
    reason: str = ""


def key_value(limit: Concurrency, inputs: Mapping[str, Any]) -> str:
    """The pool a run with ``inputs`` belongs to: its key input's value as text ("" for
    one pool per workflow). A value longer than the column is stored as its digest."""
    name = limit.key_input
    if name is None:
        return ""
    value = inputs.get(name)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    if len(text) > MAX_KEY_CHARS:
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return text


def limited_key(spec: WorkflowSpec, inputs: Mapping[str, Any], trigger: str) -> str | None:
    """The pool of a new run, or None when its run is not limited."""
    if spec.concurrency is None or trigger in UNLIMITED_TRIGGERS:
        return None
    return key_value(spec.concurrency, inputs)


def pool_lock(workflow_name: str, key: str) -> None:
    """Hold the pool's lock until the current transaction ends (call inside one)."""
    alias = router.db_for_write(Run)
    db = connections[alias]
    if not db.in_atomic_block:
        raise RuntimeError("pool_lock needs a transaction (transaction.atomic)")
    with db.cursor() as cursor:
        if db.vendor == "postgresql":
            digest = hashlib.sha256(f"{workflow_name}\0{key}".encode()).digest()
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_signed64(digest)])
        else:  # one writer at a time: a write takes the database's lock now, before the count
            table = db.ops.quote_name(Run._meta.db_table)
            cursor.execute(f"UPDATE {table} SET id = id WHERE 1 = 0")  # noqa: S608


def _signed64(digest: bytes) -> int:
    return int.from_bytes(digest[:8], "big", signed=True)


def holders(workflow_name: str, key: str) -> QuerySet[Run]:
    """The runs holding a slot of the pool (pending or running), oldest first."""
    return Run.objects.filter(
        workflow__name=workflow_name,
        concurrency_key=key,
        status__in=sorted(RUN_HOLDING_SLOT),
    ).order_by("pk")


def queued(workflow_name: str, key: str) -> QuerySet[Run]:
    """The pool's queued runs, in the order they start (creation order)."""
    return Run.objects.filter(
        workflow__name=workflow_name, concurrency_key=key, status=RunStatus.QUEUED
    ).order_by("pk")


def admit(*, workflow_name: str, limit: Concurrency, key: str) -> Admission:
    """Decide a new run's first status under the pool's lock; the caller creates the
    run in the same transaction, so no other admission sees the pool in between.

    A free slot admits the run (pending) unless runs already queue for it (they go
    first: a slot free while runs wait is a promotion on its way).
    """
    pool_lock(workflow_name, key)
    held = holders(workflow_name, key).count()
    waiting = limit.on_limit == "queue" and queued(workflow_name, key).exists()
    if held < limit.max_runs and not waiting:
        return Admission(RunStatus.PENDING)
    if limit.on_limit == "queue":
        return Admission(RunStatus.QUEUED)
    reason = limit_reached(workflow_name, limit, key, held)
    if limit.on_limit == "skip":
        return Admission(RunStatus.SKIPPED, f"skipped: {reason}")
    return Admission(RunStatus.FAILED, reason)


def limit_reached(workflow_name: str, limit: Concurrency, key: str, held: int) -> str:
    """Why a run was not admitted, naming the limit and the key."""
    pool = f" for {limit.key_input} {key!r}" if limit.key_input else ""
    return (
        f"concurrency limit reached: workflow `{workflow_name}` allows at most "
        f"{limit.max_runs} run{'s' if limit.max_runs != 1 else ''} at once{pool} "
        f"(concurrency.max_runs), and {held} {'is' if held == 1 else 'are'} pending or running"
    )


def admission_finished(run: Run, spec: WorkflowSpec) -> None:
    """Announce a run its admission ended (skipped, failed), as any finished run is."""
    if run.status in (RunStatus.SKIPPED, RunStatus.FAILED):
        logger.info(
            "run %s %s at admission: %s", run.pk, run.status, run.error_summary,
            extra={"run_id": run.pk},
        )  # fmt: skip
        transaction.on_commit(lambda: run_finished_announce(run, spec))


def resume_status(run: Run) -> str:
    """The status a resumed run goes back to: pending when its pool has a free slot
    (or it is not limited), else queued. Takes the pool's lock (call in a transaction)."""
    if run.concurrency_key is None:
        return RunStatus.PENDING
    limit = workflow_spec(run.workflow).concurrency
    if limit is None:
        return RunStatus.PENDING
    name, key = run.workflow.name, run.concurrency_key
    pool_lock(name, key)
    free = holders(name, key).count() < limit.max_runs
    return RunStatus.PENDING if free and not queued(name, key).exists() else RunStatus.QUEUED


def slots_fill(*, workflow_name: str, key: str, start: Starter | None) -> list[Run]:
    """Promote the pool's oldest queued runs to pending, as many as slots are free.

    Each queued run is admitted by its own version's limit; the first that finds no free
    slot stops the fill (first in, first out). With ``start`` (Celery) each promoted run
    is started in the same transaction; a run that cannot start (its version is no longer
    valid) is failed, naming why, and its slot goes to the next. Without ``start`` the
    caller executes the returned runs after this commits.
    """
    promoted: list[Run] = []
    with transaction.atomic():
        pool_lock(workflow_name, key)
        held = holders(workflow_name, key).count()
        while True:
            batch = list(queued(workflow_name, key).select_related("workflow")[:_FILL_BATCH])
            if not batch:
                break
            for run in batch:
                limit = workflow_spec(run.workflow).concurrency
                if limit is not None and held >= limit.max_runs:
                    return _filled(promoted, workflow_name, key)
                if not run_transition(run, RunStatus.PENDING):
                    continue  # cancelled meanwhile (the lock does not cover a cancel)
                if start is not None and not _started(run, start):
                    continue
                held += 1
                promoted.append(run)
    return _filled(promoted, workflow_name, key)


def _filled(promoted: list[Run], workflow_name: str, key: str) -> list[Run]:
    if promoted:
        logger.info(
            "concurrency: promoted %s of `%s` key %r",
            ", ".join(f"run {r.pk}" for r in promoted), workflow_name, key,
        )  # fmt: skip
    return promoted


def _started(run: Run, start: Starter) -> bool:
    """Start ``run``; a run that cannot start is failed (it then holds no slot)."""
    try:
        with transaction.atomic():
            start(run)
    except Exception as exc:  # noqa: BLE001 - any reason not to start: it must not hold the slot
        summary = f"could not start after waiting for a concurrency slot: {exc}"
        now = timezone.now()
        if run_transition(
            run, RunStatus.FAILED, finished_at=now, error_summary=summary[:MAX_SUMMARY_CHARS]
        ):
            transaction.on_commit(lambda: run_finished_announce(run))
        logger.warning("run %s: %s", run.pk, summary, extra={"run_id": run.pk})
        return False
    return True


def run_slots_fill(run: Run, *, start: Starter | None) -> list[Run]:
    """Fill the pool of ``run`` (a run of it ended or left the queue); none if unlimited."""
    if run.concurrency_key is None:
        return []
    return slots_fill(workflow_name=run.workflow.name, key=run.concurrency_key, start=start)


def queued_sweep(*, start: Starter | None) -> list[Run]:
    """Fill every pool that has queued runs: recovers a promotion whose message was lost
    (a worker killed between a run's end and its pool's fill). Returns the promoted runs."""
    pools = (
        Run.objects.filter(status=RunStatus.QUEUED, concurrency_key__isnull=False)
        .values_list("workflow__name", "concurrency_key")
        .distinct()
        .order_by("workflow__name", "concurrency_key")
    )
    promoted: list[Run] = []
    for name, key in list(pools):
        promoted += slots_fill(workflow_name=name, key=str(key), start=start)
    if promoted:
        logger.warning("concurrency sweep: promoted %s queued runs", len(promoted))
    return promoted


@dataclass(frozen=True)
class Waiting:
    """What a queued run waits behind: the runs holding its pool's slots, and its place."""

    limit: Concurrency
    key: str
    holding: list[Run]
    position: int  # 1: the next to start
    queued_total: int

    @property
    def description(self) -> str:
        return self.limit.describe()


def waiting_behind(run: Run, *, show: int = 20) -> Waiting | None:
    """For a queued run: the runs holding its pool's slots (at most ``show``) and its
    position in the pool's queue; None for any other run."""
    if run.status != RunStatus.QUEUED or run.concurrency_key is None:
        return None
    limit = workflow_spec(run.workflow).concurrency
    if limit is None:
        return None
    name, key = run.workflow.name, run.concurrency_key
    holding = list(holders(name, key).select_related("workflow")[:show])
    ahead = queued(name, key).filter(pk__lt=run.pk).count()
    total = queued(name, key).count()
    return Waiting(limit=limit, key=key, holding=holding, position=ahead + 1, queued_total=total)
