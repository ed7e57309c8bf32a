"""Run services (writes): create, execute, resume, cancel.

Commands, admin actions, API views and tasks call these and nothing deeper.
Every run is validated against the current tool registry before it starts and
reads only its workflow version's frozen definition.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.engine import checkpoint
from runs.engine.context import RunContext, build_run_context
from runs.engine.local import Observer, drive_local
from runs.engine.resolve import resolve
from runs.models import RUN_TRANSITIONS, Run, RunStatus, RunTrigger, StepResult, StepStatus
from tools.errors import FlowpilotError
from tools.registry import ToolRegistry
from workflows.inputs import resolve_inputs
from workflows.models import Workflow
from workflows.references import parse_value
from workflows.services import workflow_spec
from workflows.validator import validate_workflow

logger = logging.getLogger("flowpilot.runs")


class RunError(FlowpilotError):
    code = "run_error"


class RunStateError(RunError):
    code = "run_state_invalid"


def run_create(
    *,
    workflow: Workflow,
    trigger: str,
    inputs: Mapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
) -> Run:
    """Validate the version and the inputs, then record a pending run and its steps.

    Raises ``WorkflowInvalid`` (with every problem) or ``InputsInvalid``.
    """
    spec = workflow_spec(workflow)
    registry = registry if registry is not None else ToolRegistry.from_db()
    validate_workflow(spec, registry=registry).raise_for_errors()
    resolved = resolve_inputs(spec.inputs, dict(inputs or {}))
    with transaction.atomic():
        run = Run.objects.create(
            workflow=workflow,
            definition_hash=workflow.definition_hash,
            trigger=trigger,
            inputs=resolved,
        )
        StepResult.objects.bulk_create(StepResult(run=run, step_id=s.id) for s in spec.steps)
    logger.info("run %s created for %s (%s)", run.pk, workflow, trigger)
    return run


def _transition(run: Run, to: str, **fields: Any) -> bool:
    """Conditional update: only from a state that allows ``to``. Returns whether it won."""
    sources = [s for s, targets in RUN_TRANSITIONS.items() if to in targets]
    updated = Run.objects.filter(pk=run.pk, status__in=sources).update(status=to, **fields)
    if updated:
        run.status = to
        for key, value in fields.items():
            setattr(run, key, value)
    return bool(updated)


def run_execute(
    *,
    run: Run,
    observer: Observer | None = None,
    context: RunContext | None = None,
) -> Run:
    """Execute a pending (or resumed) run in this process and record how it ended."""
    started = {"started_at": run.started_at or timezone.now()}
    if not _transition(run, RunStatus.RUNNING, **started):
        run.refresh_from_db()
        raise RunStateError(f"run {run.pk} is {run.status}; it cannot start")
    ctx = context
    try:  # from here on, any exception fails the run: it never stays running
        if ctx is None:
            ctx = build_run_context(run_id=run.pk, spec=workflow_spec(run.workflow))
        views = drive_local(ctx, run, observer=observer)
        if views is not None:
            _finish(ctx, run, views)
    except BaseException as exc:
        summary = f"engine error: {type(exc).__name__}: {exc}"
        summary = ctx.redactor.scrub_text(summary) if ctx is not None else summary
        _transition(run, RunStatus.FAILED, finished_at=timezone.now(), error_summary=summary[:5000])
        raise
    finally:
        if context is None and ctx is not None:
            ctx.close()
    run.refresh_from_db()
    return run


def _finish(ctx: RunContext, run: Run, views: Mapping[str, Any] | None = None) -> None:
    results = checkpoint.load_results(run)
    fatal = [
        r
        for sid in ctx.graph.order
        if (r := results[sid]).status == StepStatus.FAILED and ctx.spec.step(sid).on_error == "fail"
    ]
    now = timezone.now()
    if fatal:
        summary = "; ".join(
            f"step `{r.step_id}` failed ({(r.error or {}).get('type')}): "
            f"{(r.error or {}).get('message', '')}"
            for r in fatal
        )
        _transition(run, RunStatus.FAILED, finished_at=now, error_summary=summary[:5000])
        return
    outputs, _ = checkpoint.stored_output(ctx, run_outputs(ctx, run, results, views))
    _transition(run, RunStatus.SUCCEEDED, finished_at=now, outputs=outputs, error_summary="")


def run_outputs(
    ctx: RunContext,
    run: Run,
    results: Mapping[str, StepResult],
    views: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The workflow's declared outputs, or else the outputs of its sink steps.

    ``views`` are the values steps produced in this process (full, not the capped
    stored previews); without them, the stored outputs are read.
    """
    if views is None:
        views = {sid: checkpoint.view_of(r) for sid, r in results.items()}
    if not ctx.spec.outputs:
        sinks = [s for s in ctx.graph.order if not ctx.graph.children[s]]
        return {s: views[s] for s in sinks if results[s].status == StepStatus.SUCCEEDED}
    step_ids = frozenset(ctx.graph.step_ids)
    outputs = {}
    for name, value in ctx.spec.outputs.items():
        outputs[name], _ = resolve(
            parse_value(value, step_ids),
            inputs=run.inputs,
            step_value=views.get,
            env={},
            redactor=ctx.redactor,
        )
    return outputs


@transaction.atomic
def run_prepare_resume(*, run: Run, force: bool = False) -> Run:
    """Reset a failed, cancelled (or, with ``force``, stuck running) run for resuming.

    Succeeded steps are kept and never run again. Fatally failed and skipped steps
    go back to pending. An interrupted step (running when its process died) goes
    back to pending only if its tool is idempotent; otherwise it is marked failed
    for review, because repeating a non-idempotent call blindly could do it twice.
    """
    run = Run.objects.select_for_update().get(pk=run.pk)
    allowed = {RunStatus.FAILED, RunStatus.CANCELLED} | ({RunStatus.RUNNING} if force else set())
    if run.status not in allowed:
        hint = " (use --force if the process running it died)" if run.status == "running" else ""
        raise RunStateError(
            f"run {run.pk} is {run.status}; only failed or cancelled runs resume{hint}"
        )
    if run.status == RunStatus.CANCELLED and not force:
        # Cancel lets steps in flight finish; resuming now would call them a second time.
        # A plain read, not a row lock: a finishing step task holds its row, then the run's.
        busy = run.step_results.filter(status__in=[StepStatus.RUNNING, StepStatus.QUEUED])
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
        if result.status in {StepStatus.RUNNING, StepStatus.QUEUED} and not _idempotent(
            registry, step
        ):
            result.status = StepStatus.FAILED
            result.error = {
                "type": "interrupted_non_idempotent",
                "message": f"step `{step.id}` was interrupted during a non-idempotent call; it "
                "was not repeated. Check the target system, then restart from this step.",
                "retryable": False,
            }
        elif result.status in {StepStatus.RUNNING, StepStatus.QUEUED, StepStatus.SKIPPED} or (
            result.status == StepStatus.FAILED and step.on_error == "fail"
        ):
            result.status = StepStatus.PENDING
        else:
            continue
        result.save(update_fields=["status", "error", "updated_at"])
    _transition(run, RunStatus.PENDING, finished_at=None, error_summary="", outputs=None)
    return run


def _idempotent(registry: ToolRegistry, step) -> bool:
    tool = getattr(step, "tool", None)
    spec = registry.get(tool) if tool else None
    return True if spec is None else spec.idempotent


def run_cancel(*, run: Run) -> bool:
    """Cancel a pending or running run. Steps in flight finish; nothing new starts.

    Under the run's row lock, so a Celery coordinator cannot queue a step after it;
    queued steps are skipped, so their tasks lose the claim and never start.
    """
    with transaction.atomic():
        Run.objects.select_for_update(of=("self",)).filter(pk=run.pk).first()
        if not _transition(run, RunStatus.CANCELLED, finished_at=timezone.now()):
            return False
        StepResult.objects.filter(
            run=run, status__in=[StepStatus.PENDING, StepStatus.QUEUED]
        ).update(status=StepStatus.SKIPPED, finished_at=timezone.now(), lease_expires_at=None)
    return True


def run_enqueue(*, run: Run, observer: Observer | None = None) -> Run:
    """Start a pending (or resumed) run on the Celery workers and return at once.

    A coordinator queues the ready steps as separate tasks (``runs.engine.distributed``).
    With no broker configured (the embedded default: Celery eager) the run executes in
    this process instead, exactly like ``run_execute``, and comes back finished.
    """
    from runs.engine import distributed  # it builds on this module's state rules

    if distributed.in_process():
        return run_execute(run=run, observer=observer)
    return distributed.run_start(run=run)


def run_resume(*, run: Run, force: bool = False, observer: Observer | None = None) -> Run:
    """Reset a failed or cancelled run from its checkpoint and enqueue it again."""
    return run_enqueue(run=run_prepare_resume(run=run, force=force), observer=observer)


def run_repeat(*, run: Run, trigger: str = RunTrigger.MANUAL) -> Run:
    """Enqueue a new run of the same workflow version with the same inputs."""
    again = run_create(workflow=run.workflow, trigger=trigger, inputs=run.inputs)
    return run_enqueue(run=again)


def run_purge(*, now, default_days: int, dry_run: bool = False) -> dict[str, int]:
    """Delete finished runs past their workflow's retention period.

    A workflow's ``retention_days`` (newest version) wins over ``default_days``;
    0 keeps runs forever. Returns the number of runs removed (or that would be) per
    workflow name. Runs that are still pending or running are never touched, nor are
    validation runs: each is the evidence an approval points to (only approving a
    version starts one), so the design-phase record outlives the retention period.
    """
    from datetime import timedelta

    from runs.models import RUN_TERMINAL

    removed: dict[str, int] = {}
    names = Workflow.objects.order_by("name").values_list("name", flat=True).distinct()
    for name in names:
        newest = Workflow.objects.filter(name=name).order_by("-version").first()
        days = workflow_spec(newest).retention_days
        days = default_days if days is None else days
        if days <= 0:
            continue
        runs = Run.objects.filter(
            workflow__name=name,
            status__in=list(RUN_TERMINAL),
            finished_at__lt=now - timedelta(days=days),
        ).exclude(trigger=RunTrigger.VALIDATION)
        count = runs.count()
        if count and not dry_run:
            runs.delete()
        if count:
            removed[name] = count
    return removed
