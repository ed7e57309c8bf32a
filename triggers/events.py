"""Event triggers: another workflow's finished run starts a run of this one, once per
event (``triggers:`` in a workflow file, ``docs/triggers.md``).

``triggers_sync_declared`` keeps ``EventTrigger`` rows for the triggers the active
version of a workflow declares (called when a version is activated), so the
run-finished hook finds, with one indexed query, whether any workflow waits for the
finished run's workflow. ``on_workflow_finished`` takes the event: for each such
trigger it reads the trigger from the waiting workflow's active version (its statuses,
its inputs), maps the finished run into the inputs (``workflows.event_refs``), and in
one transaction records the event and creates the run. The unique (workflow,
position, event key) of ``TriggerEvent`` makes a second delivery of the same event —
the hook called twice, two workers, a retried task — start nothing. A run's end is
one event: its key is the run's UUID and its finish time, so a resumed run that
finishes again is a new event.

A chain of runs each started by the one before ends at ``FLOWPILOT_TRIGGER_MAX_CHAIN``
runs (default 10): two workflows that trigger each other, which the validator cannot
see from one file, stop there, with the refusal recorded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from runs.models import Run, RunStatus, RunTrigger
from runs.services import run_create
from tools.errors import FlowpilotError
from triggers.models import EventOutcome, EventTrigger, TriggerEvent, TriggerKind
from workflows.event_refs import EventRefError, parse_event_value, resolve_event_value
from workflows.models import Workflow
from workflows.schema_triggers import TriggerSpec
from workflows.selectors import workflow_get_runnable
from workflows.services import workflow_spec

logger = logging.getLogger("flowpilot.triggers")

# Runs that are no events: a validation run proves a version, a replay is an offline
# comparison; neither is a run anything downstream waits for.
NOT_EVENTS = frozenset({RunTrigger.VALIDATION, RunTrigger.REPLAY})
# Starts a run the event created, once its transaction has committed.
Starter = Callable[[int], None]


def triggers_sync_declared(*, workflow: Workflow) -> None:
    """Make the ``EventTrigger`` rows of ``workflow.name`` those its active version
    declares (read again here: two activations' hooks may come in either order), none
    when no version is active. A trigger kept as it was keeps its row, and with it the
    time it has been waiting since (the sweep's lower bound) and a poll's cursor; a
    poll's new interval is taken in place. A new poll is due at once."""
    try:
        active = workflow_get_runnable(name=workflow.name)
        triggers = workflow_spec(active).triggers
    except FlowpilotError:
        triggers = []
    declared = {_declared(position, trigger): trigger for position, trigger in enumerate(triggers)}
    with transaction.atomic():
        kept = set()
        for row in EventTrigger.objects.filter(workflow_name=workflow.name):
            key = (row.position, row.kind, row.source, row.statuses, row.fingerprint)
            if key not in declared:
                row.delete()
                continue
            kept.add(key)
            poll = declared[key].poll
            if poll is not None and row.every_seconds != poll.every:
                row.every_seconds = poll.every  # and due no later than one new interval
                soon = timezone.now() + timedelta(seconds=poll.every)
                if row.next_poll_at is None or row.next_poll_at > soon:
                    row.next_poll_at = soon
                row.save(update_fields=["every_seconds", "next_poll_at"])
        EventTrigger.objects.bulk_create(
            (
                EventTrigger(
                    workflow_name=workflow.name,
                    position=position,
                    kind=kind,
                    source=source,
                    statuses=statuses,
                    fingerprint=fingerprint,
                    every_seconds=None if trigger.poll is None else trigger.poll.every,
                    next_poll_at=None if trigger.poll is None else timezone.now(),
                )
                for (position, kind, source, statuses, fingerprint), trigger in sorted(
                    declared.items(), key=lambda item: item[0]
                )
                if (position, kind, source, statuses, fingerprint) not in kept
            ),
            ignore_conflicts=True,  # another activation's sync wrote the same rows
        )
    waited_for_forget()


def declared_fingerprint(position: int, trigger: TriggerSpec) -> str:
    """The fingerprint a trigger's row holds (a poll's definition but its interval)."""
    return _declared(position, trigger)[4]


def _declared(position: int, trigger: TriggerSpec) -> tuple[int, str, str, str, str]:
    """What a trigger's row holds: (position, kind, source, statuses, fingerprint)."""
    if trigger.poll is not None:
        definition = trigger.poll.model_dump(mode="json", exclude={"every"})
        digest = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()
        return position, TriggerKind.POLL, trigger.poll.tool, "", digest
    assert trigger.on_workflow is not None  # a trigger names one event (TriggerSpec)
    statuses = ",".join(sorted(trigger.on_workflow.status))
    return position, TriggerKind.ON_WORKFLOW, trigger.on_workflow.name, statuses, ""


class _Sources:
    """The workflows some trigger waits for, as this process last read them: the
    run-finished hook asks it for every run, so a run whose workflow nobody waits for
    costs no query. It is read again once ``FLOWPILOT_TRIGGER_SOURCES_SECONDS`` have
    passed, and at once when this process activates a version (``forget``). A trigger
    another process activates is seen here within that time; an event missed meanwhile
    is taken by the sweep (``triggers_sweep``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: frozenset[str] = frozenset()
        self._read_at = -math.inf

    def __contains__(self, name: str) -> bool:
        ttl = settings.FLOWPILOT_TRIGGER_SOURCES_SECONDS
        if time.monotonic() - self._read_at > ttl:
            with self._lock:
                if time.monotonic() - self._read_at > ttl:
                    rows = EventTrigger.objects.filter(kind=TriggerKind.ON_WORKFLOW)
                    self._names = frozenset(rows.values_list("source", flat=True))
                    self._read_at = time.monotonic()
        return name in self._names

    def forget(self) -> None:
        self._read_at = -math.inf


# One per process, like the process's HTTP client: what it holds is read from the
# database and only decides whether a finished run's event is looked at.
_SOURCES = _Sources()


def waited_for(*, workflow_name: str) -> bool:
    """Whether any workflow's trigger waits for runs of ``workflow_name`` (as this
    process last read the triggers: ``_Sources``)."""
    return workflow_name in _SOURCES


def waited_for_forget() -> None:
    """Read the triggers again at the next question (a version activated here; tests)."""
    _SOURCES.forget()


def on_workflow_finished(*, run_id: int, start: Starter) -> list[TriggerEvent]:
    """Take the end of run ``run_id`` as an event: the events recorded now, one per
    trigger waiting for its workflow (none for a run that is no event, or an event
    already taken)."""
    source = Run.objects.select_related("workflow").filter(pk=run_id).first()
    if source is None or source.finished_at is None or source.trigger in NOT_EVENTS:
        return []
    rows = EventTrigger.objects.filter(source=source.workflow.name, kind=TriggerKind.ON_WORKFLOW)
    return [e for e in (_take_logged(row, source, start) for row in rows) if e is not None]


def _take_logged(row: EventTrigger, source: Run, start: Starter) -> TriggerEvent | None:
    """``_take``, an unexpected error logged: one trigger's failure never costs the
    others theirs (the sweep takes the event again later)."""
    try:
        return _take(row, source, start)
    except Exception:
        logger.exception(
            "trigger %s[%s]: the end of run %s was not taken", row.workflow_name, row.position,
            source.pk,
        )  # fmt: skip
        return None


def _take(row: EventTrigger, source: Run, start: Starter) -> TriggerEvent | None:
    try:
        workflow = workflow_get_runnable(name=row.workflow_name)
    except FlowpilotError:
        return None  # no active version: nothing waits any more
    declared = workflow_spec(workflow).triggers
    trigger = declared[row.position] if row.position < len(declared) else None
    waits = None if trigger is None else trigger.on_workflow
    if trigger is None or waits is None or waits.name != source.workflow.name:
        return None  # the row is older than the version now active
    if str(source.status) not in waits.status:
        return None
    finished_at = source.finished_at
    assert finished_at is not None  # on_workflow_finished takes finished runs only
    key = f"run:{source.uuid}:{finished_at.isoformat()}"
    chain = _chain_of(source) + 1
    with transaction.atomic():
        try:
            with transaction.atomic():  # the event's row first: a second delivery stops here
                event = TriggerEvent.objects.create(
                    workflow_name=row.workflow_name,
                    position=row.position,
                    event_key=key,
                    source_run=source,
                    source_finished_at=finished_at,
                    outcome=EventOutcome.STARTED,
                    chain=chain,
                )
        except IntegrityError:
            return None  # taken already: the same event delivered again
        refusal = _refusal(source, chain)
        if refusal is None:
            try:
                with transaction.atomic():
                    event.run = run_create(
                        workflow=workflow, trigger=RunTrigger.EVENT, inputs=_inputs(trigger, source)
                    )
            except (FlowpilotError, EventRefError) as exc:
                refusal = str(exc)
        if refusal is not None:
            event.outcome, event.message = EventOutcome.REFUSED, refusal
        event.save(update_fields=["run", "outcome", "message"])
    if event.run_id is not None:
        run_id = event.run_id
        transaction.on_commit(lambda: start_logged(start, run_id))
        logger.info(
            "trigger %s[%s]: run %s of %s started run %s",
            row.workflow_name, row.position, source.pk, source.workflow.name, run_id,
        )  # fmt: skip
    else:
        logger.warning(
            "trigger %s[%s]: run %s of %s started nothing: %s",
            row.workflow_name, row.position, source.pk, source.workflow.name, event.message,
        )  # fmt: skip
    return event


def start_logged(start: Starter, run_id: int) -> None:
    """Start the event's run; a start that fails (the broker unreachable) is logged and
    left to the sweep, which starts an event's run still pending (``triggers_sweep``)."""
    try:
        start(run_id)
    except Exception as exc:  # noqa: BLE001 - the event is recorded; the sweep starts it
        logger.warning(
            "trigger: run %s not started now (%s: %s); the sweep starts it",
            run_id, type(exc).__name__, exc,
        )  # fmt: skip


def _refusal(source: Run, chain: int) -> str | None:
    limit = settings.FLOWPILOT_TRIGGER_MAX_CHAIN
    if chain > limit:
        return (
            f"run {source.pk} ends a chain of {chain - 1} runs each started by an event of the "
            f"one before; at most {limit} runs in a row are started so "
            "(FLOWPILOT_TRIGGER_MAX_CHAIN): do two workflows trigger each other?"
        )
    return None


# Sub-workflow levels followed up to a run's top-level run (far above any valid nesting).
MAX_PARENTS = 100


def _chain_of(run: Run) -> int:
    """How many runs in a row, ending with ``run``'s top-level run, each started by an
    event of the one before (0: nothing triggered it). A child run (a ``workflow``
    step's) counts as its top-level run: a workflow that runs K as a step and waits for
    K's runs would otherwise start itself without end."""
    top = run
    for _ in range(MAX_PARENTS):
        if top.parent_run_id is None:
            break
        parent = Run.objects.filter(pk=top.parent_run_id).only("trigger", "parent_run").first()
        if parent is None:
            break
        top = parent
    if top.trigger != RunTrigger.EVENT:
        return 0
    before = TriggerEvent.objects.filter(run=top).values_list("chain", flat=True).first()
    return before or 0


def _inputs(trigger: TriggerSpec, source: Run) -> dict[str, Any]:
    """The new run's inputs: the trigger's mapping, read against the finished run."""
    event = event_of(source)
    return {
        name: resolve_event_value(parse_event_value(value), event)
        for name, value in trigger.inputs.items()
    }


def event_of(run: Run) -> dict[str, Any]:
    """What a trigger's ``$event`` references read of a finished run."""
    return {
        "run_id": run.pk,
        "run_uuid": str(run.uuid),
        "workflow": run.workflow.name,
        "version": run.workflow.version,
        "status": str(run.status),
        "outputs": run.outputs,
        "error": run.error_summary or "",
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def triggers_sweep(*, now: datetime, start: Starter, limit: int = 500) -> list[TriggerEvent]:
    """Take the events the run-finished hook missed, and start the events' runs a failed
    start left pending.

    Missed: runs of a workflow some active trigger waits for, ended as it waits for,
    in the last ``FLOWPILOT_TRIGGER_SWEEP_MINUTES`` and after the trigger was
    activated, with no event of that trigger for that end — their process died between
    the finish and the hook, or had not yet seen a trigger another process had just
    activated. Each is taken as the hook would (once: the event's unique row), at most
    ``limit`` per trigger a sweep. Pending: an event's run still pending
    ``START_GRACE_SECONDS`` after the event (its start was lost with the broker or the
    process)."""
    window = now - timedelta(minutes=settings.FLOWPILOT_TRIGGER_SWEEP_MINUTES)
    taken = []
    for row in EventTrigger.objects.filter(kind=TriggerKind.ON_WORKFLOW).order_by("pk"):
        if not _active(row.workflow_name):
            continue
        missed = (
            Run.objects.filter(
                workflow__name=row.source,
                status__in=row.statuses.split(","),
                finished_at__gte=max(window, row.created_at),
                finished_at__lte=now,
            )
            .exclude(trigger__in=NOT_EVENTS)
            .exclude(
                Exists(
                    TriggerEvent.objects.filter(
                        workflow_name=row.workflow_name,
                        position=row.position,
                        source_run=OuterRef("pk"),
                        source_finished_at=OuterRef("finished_at"),
                    )
                )
            )
            .select_related("workflow")
            .order_by("finished_at", "pk")[:limit]
        )
        taken += [e for e in (_take_logged(row, run, start) for run in missed) if e is not None]
    if taken:
        logger.warning("trigger sweep: took %d events the run-finished hook missed", len(taken))
    stuck = TriggerEvent.objects.filter(
        outcome=EventOutcome.STARTED,
        run__status=RunStatus.PENDING,
        created_at__gte=window,
        created_at__lte=now - timedelta(seconds=START_GRACE_SECONDS),
    ).values_list("run_id", flat=True)
    for run_id in stuck[:limit]:
        logger.warning("trigger sweep: starting run %s, whose start was lost", run_id)
        start_logged(start, run_id)
    return taken


# How long an event's run may stay pending before the sweep starts it (its start lost).
START_GRACE_SECONDS = 60


def _active(workflow_name: str) -> bool:
    try:
        workflow_get_runnable(name=workflow_name)
    except FlowpilotError:
        return False
    return True
