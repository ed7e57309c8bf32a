"""How a run ends: failed (naming every fatal step) or succeeded with its outputs.

Both drivers call ``run_finish`` once nothing is left to start or in flight: the
in-process one with the values its steps produced, the Celery coordinator with the
stored outputs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from runs.engine import checkpoint
from runs.engine.context import RunContext
from runs.engine.metrics import metrics_enabled, process_metrics
from runs.engine.resolve import resolve
from runs.engine.tracing import (
    INT64_MAX,
    INT64_MIN,
    emit_run_span,
    lost_span,
    sampled,
    tracing_enabled,
)
from runs.models import ApprovalRequest, ApprovalStatus, Run, StepResult
from runs.state import (
    RowWrite,
    RunStatus,
    RunTrigger,
    StepStatus,
    run_transition,
    run_write,
    step_transition,
)
from tools.hooks import hooks_announce
from workflows.references import parse_value
from workflows.schema import WorkflowSpec

logger = logging.getLogger("flowpilot.engine")

MAX_SUMMARY_CHARS = 5000


def run_finish(
    ctx: RunContext,
    run: Run,
    views: Mapping[str, Any] | None = None,
    *,
    results: Mapping[str, StepResult] | None = None,
) -> None:
    """Record how ``run`` ended; ``views`` as in ``run_outputs``. ``results`` are the
    step rows as the driver wrote them (else they are read)."""
    if results is None:
        results = checkpoint.load_results(run)
    if run_wait(ctx, run, results) is not None:
        return  # it waits for a person (or was decided meanwhile: the decision goes on)
    to, fields = _ending(ctx, run, views, results)
    if run_transition(run, to, **fields):
        run_finished_announce(run, ctx.spec)


def run_wait(ctx: RunContext, run: Run, results: Mapping[str, StepResult]) -> bool | None:
    """A run with nothing to start and nothing in flight whose approval steps wait: it
    waits too (running → waiting), holding nothing. None when no step waits
    (``results`` as the driver wrote them), or when a step failed the run: it fails,
    and its waiting steps are skipped (their requests cancelled). False when every step
    that waited was decided meanwhile (read again under the run's row lock, which a
    decision takes too): the caller drives the run on.
    """
    if not any(r.status == StepStatus.WAITING for r in results.values()):
        return None
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()
        waiting = list(
            StepResult.objects.filter(run=run, status=StepStatus.WAITING).values_list(
                "pk", "step_id"
            )
        )
        if not waiting:
            return False
        if any(
            r.status == StepStatus.FAILED and ctx.spec.step(sid).on_error == "fail"
            for sid, r in results.items()
        ):
            _waiting_skipped(run, [pk for pk, _ in waiting], ctx.now())
            for _, step_id in waiting:  # as written: the finish reads them next
                results[step_id].status = StepStatus.SKIPPED
            return None
        parked = run_transition(run, RunStatus.WAITING)
    if parked:
        logger.info(
            "run %s waits for approval of %s", run.pk, ", ".join(sorted(s for _, s in waiting)),
            extra={"run_id": run.pk},
        )  # fmt: skip
    return True


def _waiting_skipped(run: Run, pks: list[int], now: Any) -> None:
    """The run failed while approval steps waited: they never will be decided."""
    step_transition(
        StepResult.objects.filter(pk__in=pks), StepStatus.SKIPPED, finished_at=now, updated_at=now
    )
    ApprovalRequest.objects.filter(step_result_id__in=pks, status=ApprovalStatus.PENDING).update(
        status=ApprovalStatus.CANCELLED, decided_at=now
    )


def run_finish_write(
    ctx: RunContext, run: Run, views: Mapping[str, Any], results: Mapping[str, StepResult]
) -> RowWrite:
    """``run_finish`` prepared for ``runs.state.rows_write``: the in-process driver sends
    it in one atomic write with the last steps' outcomes. Safe to send again (its
    ``finished_at`` is its own). Once it landed, the caller announces the run
    (``run_finished_announce``)."""
    to, fields = _ending(ctx, run, views, results)
    return run_write(run, to, replay="finished_at", **fields)


def _ending(
    ctx: RunContext,
    run: Run,
    views: Mapping[str, Any] | None,
    results: Mapping[str, StepResult],
) -> tuple[str, dict[str, Any]]:
    """How ``run`` ends: failed, naming every fatal step, or succeeded with its outputs
    (the status and the fields to write)."""
    fatal = [
        r
        for sid in ctx.graph.order
        if (r := results[sid]).status == StepStatus.FAILED and ctx.spec.step(sid).on_error == "fail"
    ]
    now = ctx.now()
    if fatal:
        summary = "; ".join(
            f"step `{r.step_id}` failed ({(r.error or {}).get('type')}): "
            f"{(r.error or {}).get('message', '')}"
            for r in fatal
        )
        return RunStatus.FAILED, {"finished_at": now, "error_summary": summary[:MAX_SUMMARY_CHARS]}
    outputs, _ = checkpoint.stored_output(ctx, run_outputs(ctx, run, results, views))
    return RunStatus.SUCCEEDED, {"finished_at": now, "outputs": outputs, "error_summary": ""}


def run_finished_announce(run: Run, spec: WorkflowSpec | None = None) -> None:
    """Tell the upper layers (schedules, notifications) that ``run`` has finished.

    The hooks are named in ``FLOWPILOT_RUN_FINISHED_HOOKS`` and run after the commit
    that finished the run; each only queues a task, so the finishing worker does not
    wait for an email or a webhook. ``runs`` never imports the layers it wakes up.
    They get the run's id and what never changes about it — its ``trigger``, whether
    it is a ``child`` run of a workflow step, whether it is ``limited`` (holds a slot of
    a concurrency limit: ``runs.concurrency``) and, when the caller has the version's
    spec, its ``workflow``'s name and whether it declares any report channel
    (``reports``; each None: not known) — so a
    hook that is not concerned reads nothing (a hook must accept further keyword
    arguments). A replay
    (``runs.replay``) is announced to no one: it is an offline comparison, not a run
    anything waits for or reports on.
    """
    if run.trigger == RunTrigger.REPLAY:
        return
    if tracing_enabled():
        _root_span(run)
    if metrics_enabled():
        _counted(run)
    hooks_announce(
        setting="FLOWPILOT_RUN_FINISHED_HOOKS",
        run_id=run.pk,
        trigger=run.trigger,
        child=run.parent_step_id is not None,
        limited=run.concurrency_key is not None,
        reports=None if spec is None else spec.notifications.has_channels(),
        workflow=None if spec is None else spec.name,
    )


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


def _root_span(run: Run) -> None:
    """The run's root span (``runs.engine.tracing``), from its creation to its end; a span
    that cannot be made is lost, never the run's end."""
    try:
        _emit_root(run)
    except Exception as exc:  # noqa: BLE001 - a span is never worth a run
        lost_span(exc)


def _emit_root(run: Run) -> None:
    if not sampled(str(run.uuid)):
        return  # nothing to write, so nothing to read for it
    version = run.workflow
    emit_run_span(
        run_id=run.pk,
        run_uuid=str(run.uuid),
        workflow=version.name,
        version=version.version,
        version_hash=version.definition_hash,
        status=str(run.status),
        trigger=str(run.trigger),
        started=run.created_at,
        finished=run.finished_at or run.created_at,
        error_summary=run.error_summary or "",
        approved_by=version.approved_by_id,
        approved_at=version.approved_at.isoformat() if version.approved_at else None,
        parent_run_id=run.parent_run_id,
        resumed_at=run.resumed_at,
        extra=_span_extras(run),
    )


def _span_extras(run: Run) -> dict[str, int]:
    """What upper layers add to the root span (``FLOWPILOT_RUN_SPAN_PROVIDERS``, each
    called as ``provider(run=run)``: the approval the run ran under). Ids only: a
    number says nothing secret, so nothing here needs masking; a key the span already
    has is never replaced. A provider that fails loses its own attributes, never the
    span: inside a transaction it runs in a savepoint of its own (a failed query must
    not leave the caller's transaction aborted; outside one, in autocommit, nothing is
    left aborted and a savepoint would cost a commit), and its error is logged."""
    extras: dict[str, int] = {}
    for path in getattr(settings, "FLOWPILOT_RUN_SPAN_PROVIDERS", ()):
        guard = (
            transaction.atomic() if transaction.get_connection().in_atomic_block else nullcontext()
        )
        try:
            with guard:
                given = dict(import_string(path)(run=run))
        except Exception as exc:  # noqa: BLE001 - an attribute is never worth the span
            logger.warning("tracing: %s gave no attributes (%s: %s)", path, type(exc).__name__, exc)
            continue
        for key, value in given.items():
            if type(key) is str and type(value) is int and INT64_MIN <= value <= INT64_MAX:
                extras.setdefault(key, value)
    return extras


def _counted(run: Run) -> None:
    """The run in the process's metrics (``runs.engine.metrics``)."""
    metrics = process_metrics()
    if metrics is None:
        return
    took = run.finished_at - run.started_at if run.finished_at and run.started_at else None
    metrics.run_finished(
        workflow=run.workflow.name,
        status=str(run.status),
        trigger=str(run.trigger),
        seconds=None if took is None else took.total_seconds(),
    )
