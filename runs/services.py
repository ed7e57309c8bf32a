"""Run services (writes): create, execute, resume, cancel.

Commands, admin actions, API views and tasks call these and nothing deeper.
Every run is validated against the current tool registry before it starts and
reads only its workflow version's frozen definition.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from runs import concurrency
from runs.engine import caches, subruns
from runs.engine.attempt import step_idempotent
from runs.engine.build import build_run_context
from runs.engine.celery.broker import in_process
from runs.engine.celery.children import parent_step_settle
from runs.engine.celery.run import run_start
from runs.engine.context import RunContext
from runs.engine.finish import MAX_SUMMARY_CHARS, run_finish, run_finished_announce, run_wait
from runs.engine.http import process_http_client
from runs.engine.local import Observer, drive_local
from runs.engine.rows import run_rows_create
from runs.engine.secrets import inputs_refuse_secrets
from runs.models import ApprovalRequest, ApprovalStatus, Run, StepResult
from runs.replay.recorder import call_recorder_for
from runs.state import (
    RUN_TERMINAL,
    STEP_IN_FLIGHT,
    InterruptedNonIdempotent,
    RunError,
    RunNotStarted,
    RunStateError,
    RunStatus,
    RunTrigger,
    StepStatus,
    run_transition,
    run_write,
    step_transition,
)
from tools.permissions import actor_user, permission_require
from tools.registry import ToolRegistry
from workflows.inputs import resolve_inputs
from workflows.models import Workflow
from workflows.pins import workflow_pins_check
from workflows.schema import WorkflowSpec
from workflows.services import workflow_spec
from workflows.validation.subworkflows import max_depth
from workflows.validator import validate_workflow

logger = logging.getLogger("flowpilot.runs")


__all__ = [
    "RunError",
    "RunStateError",
    "run_cancel",
    "run_create",
    "run_enqueue",
    "run_execute",
    "run_prepare_resume",
    "run_purge",
    "run_repeat",
    "run_resume",
]


def run_create(
    *,
    workflow: Workflow,
    trigger: str,
    inputs: Mapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
    restarted_from: Run | None = None,
    restarted_from_step: str = "",
    reuse: Mapping[str, StepResult] | None = None,
    replay_of: Run | None = None,
    progress: Mapping[str, StepResult] | None = None,
    started_by: Any = None,
) -> Run:
    """Validate the version and the inputs, then record a pending run and its steps.

    ``started_by``: the user who started it (an anonymous or no user records none).

    A restart (``runs.restart``) links the new run to ``restarted_from`` and gives
    ``reuse``: step id → the original's result, copied as this run's result (marked
    ``reused``, never executed), and ``progress``: step id → the original's result
    whose output is seeded into this run's pending row, which its kind carries when the
    step starts (``StepKind.carry``: a foreach calls only the items that did not
    succeed). A replay (``runs.replay``) links ``replay_of``.

    Raises ``WorkflowInvalid`` (with every problem; ``tool_changed`` when a tool of
    an approved version changed since approval — a validation run, which proves the
    version on the new definitions, is not refused) or ``InputsInvalid`` (also for
    an input holding a secret value: stored inputs are read back by the run, so they
    are never masked, and a secret is refused rather than stored).
    """
    _, spec = caches.spec_for(workflow)
    if registry is None:
        state = caches.tools_state()
        registry = caches.registry_for(state)
        report = caches.validation_for(workflow, state=state, registry=registry)
    else:  # a caller's own registry: nothing cached is known to match it
        report = validate_workflow(spec, registry=registry)
    report.raise_for_errors()
    if trigger not in (RunTrigger.VALIDATION, RunTrigger.REPLAY):  # neither is a live run
        workflow_pins_check(workflow=workflow, registry=registry)
    resolved = resolve_inputs(spec.inputs, dict(inputs or {}))
    inputs_refuse_secrets(inputs=resolved, registry=registry, env=os.environ)
    run = Run(
        workflow=workflow,
        definition_hash=workflow.definition_hash,
        trigger=trigger,
        inputs=resolved,
        restarted_from=restarted_from,
        restarted_from_step=restarted_from_step,
        replay_of=replay_of,
        started_by=actor_user(started_by),
    )
    reuse, progress = reuse or {}, progress or {}
    rows = [
        _reused_copy(run, reuse[s.id])
        if s.id in reuse
        else StepResult(run=run, step_id=s.id, output=_seed(progress.get(s.id)))
        for s in spec.steps
    ]
    key = concurrency.limited_key(spec, resolved, trigger)
    if key is None:
        run_rows_create(run, rows)
    else:  # admitted and written under the pool's lock: no other admission in between
        with transaction.atomic():
            _admit(run, rows, spec=spec, key=key)
            run_rows_create(run, rows)
            concurrency.admission_finished(run, spec)
        if run.status != RunStatus.PENDING:
            logger.info(
                "run %s created %s for %s (%s)", run.pk, run.status, workflow, trigger,
                extra={"run_id": run.pk},
            )  # fmt: skip
            return run
    logger.info("run %s created for %s (%s)", run.pk, workflow, trigger, extra={"run_id": run.pk})
    # Executed in this process right away (runflow, the admin), the run uses the registry
    # it was just validated against instead of reading the tool table's state again, and
    # the step rows just written instead of reading them back (where the database gave
    # their ids).
    run.validated_registry = registry
    if all(row.pk is not None for row in rows):
        run.created_results = {row.step_id: row for row in sorted(rows, key=lambda r: r.step_id)}
    return run


def _admit(run: Run, rows: list[StepResult], *, spec: WorkflowSpec, key: str) -> None:
    """Set the first status of a limited run (``runs.concurrency.admit``) on it and its
    new step rows: pending or queued as created, or skipped / failed, finished now."""
    assert spec.concurrency is not None  # a key is only given under a limit
    admission = concurrency.admit(workflow_name=run.workflow.name, limit=spec.concurrency, key=key)
    run.concurrency_key = key
    run.status = admission.status
    if admission.status in (RunStatus.PENDING, RunStatus.QUEUED):
        return
    now = timezone.now()
    run.finished_at, run.error_summary = now, admission.reason[:MAX_SUMMARY_CHARS]
    for row in rows:
        if not row.reused:
            row.status, row.finished_at = StepStatus.SKIPPED, now


_REUSED_FIELDS = (
    "status", "attempts", "attempt_log", "inputs", "inputs_truncated", "output",
    "output_truncated", "output_bytes", "error", "started_at", "finished_at",
)  # fmt: skip


def _reused_copy(run: Run, source: StepResult) -> StepResult:
    """A finished result of another run as ``run``'s own, flagged ``reused``: a new row
    created in its final state, not a status change (the stored values are copied as
    stored, already scrubbed and escaped)."""
    copied = {name: getattr(source, name) for name in _REUSED_FIELDS}
    return StepResult(run=run, step_id=source.step_id, reused=True, **copied)


def _seed(source: StepResult | None) -> Any:
    """The progress a restarted step starts from: the original's output as stored."""
    return None if source is None or source.output_truncated else source.output


def run_execute(
    *,
    run: Run,
    observer: Observer | None = None,
    context: RunContext | None = None,
) -> Run:
    """Execute a pending (or resumed) run in this process and record how it ended.

    Under a concurrency limit, with no broker, the runs its end lets out of the queue
    are executed here next (``_queue_drain``); on Celery its end is announced and
    ``runs.fill_slots`` starts them on the workers.
    """
    try:
        return _execute(run=run, observer=observer, context=context)
    finally:
        if run.concurrency_key is not None and in_process():
            _queue_drain(run)


def _execute(
    *,
    run: Run,
    observer: Observer | None = None,
    context: RunContext | None = None,
) -> Run:
    """``run_execute``'s body: execute one run here and record how it ended.

    A run ``run_create`` has just made in this process starts with its first steps'
    claims, in one atomic write (``drive_local``'s ``start``); any other run is moved to
    running first, on its own. Either way a run that is not pending any more is refused
    (``RunStateError``) and left as it is.
    """
    started = {"started_at": run.started_at or timezone.now()}
    # The rows run_create wrote, valid while the run has never started: its first start.
    created, run.created_results = run.created_results, None
    start = None
    if created is not None:  # its started_at is taken now: the start's own, to send again
        start = run_write(run, RunStatus.RUNNING, replay="started_at", **started)
    elif not run_transition(run, RunStatus.RUNNING, **started):
        run.refresh_from_db()
        raise RunStateError(f"run {run.pk} is {run.status}; it cannot start")
    ctx = context
    try:  # from here on, any exception fails the run: it never stays running
        if ctx is None:
            ctx = build_run_context(
                run_id=run.pk,
                run_uuid=str(run.uuid),
                plan=caches.plan_for(run.workflow),
                registry=run.validated_registry or caches.registry_for(caches.tools_state()),
                taps=call_recorder_for(run),
                # The process's client, as a Celery step task's: no cookies, so nothing
                # crosses runs but its pooled connections, kept from one run to the next.
                http=process_http_client(),
            )
        if ctx.run_child is None:
            ctx.run_child = _execute_child
        driven = drive_local(ctx, run, observer=observer, results=created, start=start)
        # An approval step decided while this run was still running: drive on from the
        # checkpoint (``run_wait``, False), until the run finishes or waits.
        waits = None
        while driven is not None and driven.finished is None:
            waits = run_wait(ctx, run, driven.results)
            if waits is not False:
                break
            driven = drive_local(ctx, run, observer=observer)
        if driven is not None and driven.finished is None and not waits:
            # A validation run's recorded calls are stored before the run is seen
            # finished: a replay started then must find every call (the context's
            # close, below, would store them only after the finish).
            if ctx.taps is not None:
                ctx.taps.flush()
            run_finish(ctx, run, driven.views, results=driven.results)
        elif driven is not None and driven.finished:  # written with the last outcomes
            run_finished_announce(run, ctx.spec)
    except RunNotStarted:
        raise  # nothing of the run was written: it is someone else's, or finished
    except BaseException as exc:
        summary = f"engine error: {type(exc).__name__}: {exc}"
        summary = ctx.redactor.scrub_text(summary) if ctx is not None else summary
        failed = {"finished_at": timezone.now(), "error_summary": summary[:MAX_SUMMARY_CHARS]}
        if run.status == RunStatus.PENDING:  # its start not written yet: fail it if still so
            pending = Run.objects.filter(pk=run.pk, status=RunStatus.PENDING)
            if run_transition(pending, RunStatus.FAILED, **failed):
                run.refresh_from_db()
                run_finished_announce(run)
        elif run_transition(run, RunStatus.FAILED, **failed):
            run_finished_announce(run)
        raise
    finally:
        if context is None and ctx is not None:
            ctx.close()
    if run.status not in RUN_TERMINAL:  # finished here, the instance holds what was written
        run.refresh_from_db()
    return run


def _queue_drain(ended: Run) -> None:
    """In process: fill the pool of ``ended`` and execute the runs promoted, one after
    another in this loop (never nested: each one's end fills the pool again from here),
    until the pool has no queued run or no free slot."""
    done = [ended]
    while done:
        for promoted in concurrency.run_slots_fill(done.pop(), start=None):
            try:
                _execute(run=promoted)
            except Exception:  # recorded on that run (failed); the queue goes on
                logger.exception(
                    "run %s (promoted from the queue) failed", promoted.pk,
                    extra={"run_id": promoted.pk},
                )  # fmt: skip
            done.append(promoted)


def _slots_release(run: Run) -> None:
    """A limited run left its slot outside a driver's end (cancelled): fill its pool, on
    the workers (Celery) or here (no broker)."""
    if run.concurrency_key is None:
        return
    if in_process():
        _queue_drain(run)
    else:
        concurrency.run_slots_fill(run, start=concurrency.start_on_workers)


def _execute_child(child: Run) -> Run:
    """A `workflow` step's child run, executed in this process to its end."""
    return run_execute(run=child)


@transaction.atomic
def run_prepare_resume(*, run: Run, force: bool = False) -> Run:
    """Reset a failed, cancelled (or, with ``force``, stuck running) run for resuming.

    Succeeded steps are kept and never run again. Fatally failed and skipped steps
    go back to pending; the failed or cancelled child run of a `workflow` step among
    them is prepared too, so the step resumes it instead of starting a fresh one. An
    interrupted step (running when its process died) goes
    back to pending only if its tool is idempotent; otherwise it is marked failed
    for review, because repeating a non-idempotent call blindly could do it twice.
    """
    run = Run.objects.select_for_update().get(pk=run.pk)
    allowed = {RunStatus.FAILED, RunStatus.CANCELLED} | ({RunStatus.RUNNING} if force else set())
    if run.status not in allowed:
        stuck = run.status == RunStatus.RUNNING
        hint = " (use --force if the process running it died)" if stuck else ""
        if run.status == RunStatus.SUCCEEDED:
            hint = f"; to run it again from a step: manage.py restartflow {run.pk} --from STEP"
        raise RunStateError(
            f"run {run.pk} is {run.status}; only failed or cancelled runs resume{hint}"
        )
    if run.status == RunStatus.CANCELLED and not force:
        # Cancel lets steps in flight finish; resuming now would call them a second time.
        # A plain read, not a row lock: a finishing step task holds its row, then the run's.
        busy = run.step_results.filter(status__in=sorted(STEP_IN_FLIGHT))
        busy_ids = list(busy.order_by("step_id").values_list("step_id", flat=True))
        if busy_ids:
            names = ", ".join(f"`{s}`" for s in busy_ids)
            raise RunStateError(
                f"run {run.pk} was cancelled, but {'steps' if len(busy_ids) > 1 else 'step'} "
                f"{names} {'are' if len(busy_ids) > 1 else 'is'} still running; resume once "
                "they have finished (use --force if the process running them died)"
            )
    spec = workflow_spec(run.workflow)
    registry = ToolRegistry.from_db()
    for result in run.step_results.select_for_update().order_by("step_id"):
        step = spec.step(result.step_id)
        now = timezone.now()
        if result.status in STEP_IN_FLIGHT and not step_idempotent(registry, step):
            error = InterruptedNonIdempotent(step.id).record()
            step_transition(result, StepStatus.FAILED, error=error, updated_at=now)
        elif result.status in STEP_IN_FLIGHT | {StepStatus.SKIPPED} or (
            result.status == StepStatus.FAILED and step.on_error == "fail"
        ):
            step_transition(result, StepStatus.PENDING, updated_at=now, claim_token="")
            if step.called_workflow() is not None:
                subruns.child_prepare_resume(parent=result, force=force, prepare=run_prepare_resume)
    # Back to pending, or to the queue when its concurrency limit has no free slot.
    to = concurrency.resume_status(run)
    run_transition(
        run, to, finished_at=None, error_summary="", outputs=None, resumed_at=timezone.now()
    )
    return run


OPERATE_PERMISSION = "runs.operate_run"


def run_cancel(*, run: Run, actor: Any = None) -> bool:
    """Cancel a queued, pending, running or waiting run. Steps in flight finish; nothing
    new starts; approval steps waiting are skipped and their requests cancelled. A
    limited run's slot (or place in the queue) goes to the next queued run.

    ``actor`` needs ``runs.operate_run`` (``tools.permissions``: None is an operator's
    command or the engine).

    Under the run's row lock, so a Celery coordinator cannot queue a step after it;
    queued steps are skipped, so their tasks lose the claim and never start.

    Sub-workflows: the child runs of its `workflow` steps are cancelled with it (and
    theirs), and a step parked on a child (Celery) fails as cancelled, so a resume runs
    it again. A cancelled child run fails its parked parent step, and the parent goes on
    under that step's ``on_error``.
    """
    permission_require(actor=actor, permission=OPERATE_PERMISSION, action=f"cancel run {run.pk}")
    with transaction.atomic():
        Run.objects.select_for_update(of=("self",)).filter(pk=run.pk).first()
        if not run_transition(run, RunStatus.CANCELLED, finished_at=timezone.now()):
            return False
        step_transition(
            StepResult.objects.filter(
                run=run, status__in=[StepStatus.PENDING, StepStatus.QUEUED, StepStatus.WAITING]
            ),
            StepStatus.SKIPPED,
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
        subruns.parked_steps_cancel(run=run, now=timezone.now())
        # Its approval steps will never be decided (a resume asks again).
        ApprovalRequest.objects.filter(run=run, status=ApprovalStatus.PENDING).update(
            status=ApprovalStatus.CANCELLED, decided_at=timezone.now()
        )
    for child in subruns.active_children(run=run):
        run_cancel(run=child, actor=actor)
    if run.parent_step_id is not None:
        parent_step_settle(child_run_id=run.pk)
    _slots_release(run)
    return True


def run_enqueue(*, run: Run, observer: Observer | None = None) -> Run:
    """Start a pending (or resumed) run on the Celery workers and return at once.

    A coordinator queues the ready steps as separate tasks (``runs.engine.celery``).
    With no broker configured (the embedded default: Celery eager) the run executes in
    this process instead, exactly like ``run_execute``, and comes back finished.

    A run its concurrency limit did not admit (queued, skipped, failed) is not started
    here: a queued run starts when a slot frees, the others never start. For a queued
    run its pool is filled first (a slot left free by a lost fill goes to the oldest
    queued run now, not at the next sweep), and the run comes back as it is then.
    """
    if run.concurrency_key is not None and run.status != RunStatus.PENDING:
        if run.status == RunStatus.QUEUED:
            _slots_release(run)
            run.refresh_from_db()
        return run
    if in_process():
        return run_execute(run=run, observer=observer)
    run.created_results = None  # started elsewhere: this instance's rows go stale
    return run_start(run=run)


def run_resume(
    *, run: Run, force: bool = False, observer: Observer | None = None, actor: Any = None
) -> Run:
    """Reset a failed or cancelled run from its checkpoint and enqueue it again.

    ``actor`` needs ``runs.operate_run``.
    """
    permission_require(actor=actor, permission=OPERATE_PERMISSION, action=f"resume run {run.pk}")
    return run_enqueue(run=run_prepare_resume(run=run, force=force), observer=observer)


def run_repeat(*, run: Run, trigger: str = RunTrigger.MANUAL, actor: Any = None) -> Run:
    """Enqueue a new run of the same workflow version with the same inputs.

    ``actor`` needs ``runs.operate_run``.
    """
    permission_require(actor=actor, permission=OPERATE_PERMISSION, action=f"repeat run {run.pk}")
    again = run_create(workflow=run.workflow, trigger=trigger, inputs=run.inputs, started_by=actor)
    return run_enqueue(run=again)


def run_purge(
    *, now: datetime, default_days: int, dry_run: bool = False, batch_size: int | None = None
) -> dict[str, int]:
    """Delete finished runs past their workflow's retention period.

    With ``batch_size``, at most that many runs (with their step results) are deleted
    per transaction, so a large backlog never holds one long lock on the runs table.

    A workflow's ``retention_days`` (newest version) wins over ``default_days``;
    0 keeps runs forever. Returns the number of runs removed (or that would be) per
    workflow name. Runs that are still pending or running are never touched, nor are
    validation runs: each is the evidence an approval points to (only approving a
    version starts one), so the design-phase record outlives the retention period —
    with the child runs of its `workflow` steps, whose recorded calls a replay needs.
    """
    removed: dict[str, int] = {}
    names = Workflow.objects.order_by("name").values_list("name", flat=True).distinct()
    for name in names:
        newest = Workflow.objects.filter(name=name).order_by("-version").first()
        if newest is None:  # deleted since the names were read
            continue
        days = workflow_spec(newest).retention_days
        days = default_days if days is None else days
        if days <= 0:
            continue
        runs = Run.objects.filter(
            workflow__name=name,
            status__in=list(RUN_TERMINAL),
            finished_at__lt=now - timedelta(days=days),
        ).exclude(_validation_or_under())
        count = runs.count()
        if count and not dry_run:
            _delete_in_batches(runs, batch_size or count)
        if count:
            removed[name] = count
    return removed


def _validation_or_under() -> Q:
    """A validation run, or a child run under one (its `workflow` steps' children, and
    theirs: their recorded calls are what a replay of the version answers from)."""
    condition, path = Q(trigger=RunTrigger.VALIDATION), "parent_run__"
    for _ in range(max_depth()):
        condition |= Q(**{f"{path}trigger": RunTrigger.VALIDATION})
        path += "parent_run__"
    return condition


def _delete_in_batches(runs: QuerySet[Run], batch_size: int) -> None:
    while ids := list(runs.order_by("pk").values_list("pk", flat=True)[:batch_size]):
        with transaction.atomic():
            Run.objects.filter(pk__in=ids).delete()
