"""`workflow` steps: run another active workflow as a child run (docs/steps.md).

The step's mapped inputs are the child's inputs; its output is the child's outputs.
The child run is linked to the step (``Run.parent_step``, ``Run.parent_run``). One
child serves a step: a step tried again after a failed or cancelled child starts a
fresh one, while resuming the parent resumes that child (``run_prepare_resume``), and
a step run again after its child succeeded (a resumed run) reads that child's outputs.

Which version runs: the active one, which must still be the one approved with the
parent (``Workflow.workflow_pins``); a validation run proves the active one. A replay
(``runs.replay``) creates its children itself (``ctx.create_child``): the pinned
version, answered from the validation run's child's recorded calls.

How the step waits depends on the driver:

- **in process** (``runs.services.run_execute`` sets ``ctx.run_child``) the step drives
  its child to the end on the pool thread that runs it. The whole in-process run is one
  blocking call anyway; the child's steps get a thread pool of their own, and the parent
  keeps one of its parallel slots while it waits (at most ``FLOWPILOT_MAX_WORKFLOW_DEPTH``
  pools deep). A cancel of the parent cancels the child (``run_cancel``), which its
  driver sees within 0.2 s.
- **on Celery** the step must not hold a worker while the child runs: it *parks*. In
  one transaction it creates the child and hands its claim over to it (the claim token
  becomes ``child:<run id>``, the lease is cleared so the sweeper leaves it alone), and
  the child is started once that commits (the ``runs.start_run`` task). The task then
  returns: its own result is discarded, because the claim is no longer its. When the
  child finishes, ``runs.engine.celery.children.parent_step_settle`` (queued by the run-finished
  hook) writes the step's outcome under the claim and advances the parent.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from django.db import connection, transaction

from runs.engine.celery.broker import definition_queue, run_task_options
from runs.engine.context import RunContext
from runs.engine.creation import child_run_create
from runs.engine.kinds.base import Attempt, Describe, StepKind
from runs.models import Run, StepResult
from runs.state import RunStatus, RunTrigger, StepStatus
from tools.errors import FlowpilotError
from tools.jsondata import store_unescape
from workflows.graph import FlowGraph
from workflows.models import Workflow
from workflows.schema import LoopStep, WorkflowStep
from workflows.validation.subworkflows import active_version, max_depth

CHILD_CLAIM_PREFIX = "child:"  # the claim token of a step parked on its child run
START_TASK = "runs.start_run"


class SubworkflowFailed(FlowpilotError):
    """The child run failed or was cancelled; the message names its failing steps."""

    code = "subworkflow_failed"


class SubworkflowUnavailable(FlowpilotError):
    """The child cannot run: no active version, changed since approval, or too deep."""

    code = "subworkflow_unavailable"


def execute_workflow_step(ctx: RunContext, step: WorkflowStep, args: dict[str, Any]) -> Attempt:
    parent = StepResult.objects.select_related("run__workflow").get(
        run_id=ctx.run_id, step_id=step.id
    )
    if ctx.run_child is None:
        return _park_or_read(ctx, step, args, parent)
    try:
        child = current_child(parent)
        if child is None or child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            child = child_create(ctx, step, args, parent)
        if child.status == RunStatus.RUNNING:
            raise SubworkflowUnavailable(
                f"step `{step.id}`: its child run {child.pk} is still running (its process "
                f"died?); resume it with `resumeflow {child.pk} --force` first"
            )
        if child.status == RunStatus.PENDING:
            child = ctx.run_child(child)
        return Attempt(output=child_output(step, child))
    finally:
        connection.close()  # this pool thread's own connection (a no-op on in-memory SQLite)


def _park_or_read(
    ctx: RunContext, step: WorkflowStep, args: dict[str, Any], parent: StepResult
) -> Attempt:
    """On Celery: create (or take up) the child, hand the step's claim to it, start it."""
    child = current_child(parent)
    if child is not None and child.status == RunStatus.SUCCEEDED:
        return Attempt(output=child_output(step, child))
    with transaction.atomic():
        if child is None or child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            child = child_create(ctx, step, args, parent)
        return park_on_child(step, parent, child)


def park_on_child(step: WorkflowStep | LoopStep, parent: StepResult, child: Run) -> Attempt:
    """Hand the step's claim over to ``child`` and start it once this commits (inside the
    caller's transaction); the ``Attempt`` returned is discarded."""
    parked = StepResult.objects.filter(
        pk=parent.pk, status=StepStatus.RUNNING, run__status=RunStatus.RUNNING
    ).update(claim_token=f"{CHILD_CLAIM_PREFIX}{child.pk}", lease_expires_at=None)
    if not parked:  # the run was cancelled meanwhile: no child is left behind
        raise SubworkflowFailed(f"step `{step.id}`: the run ended before its child started")
    if child.status == RunStatus.PENDING:
        child_pk = child.pk
        options = run_task_options(definition_queue(child.workflow.definition))
        transaction.on_commit(lambda: current_app.send_task(START_TASK, args=[child_pk], **options))
    return Attempt(output={"parked_on_run": child.pk})  # discarded: the claim is the child's


def current_child(parent: StepResult) -> Run | None:
    """The newest child run of a `workflow` step's result, if any."""
    return Run.objects.filter(parent_step=parent).order_by("-id").first()


def child_create(
    ctx: RunContext, step: WorkflowStep | LoopStep, args: dict[str, Any], parent: StepResult
) -> Run:
    """A new child run of ``step`` with inputs ``args`` (a replay's: the recorded one)."""
    if ctx.create_child is not None:  # a replay: the recorded child, offline
        return ctx.create_child(step, args, parent)
    version = child_version(step, parent.run)
    return child_run_create(
        workflow=version, inputs=args, registry=ctx.registry, parent_step=parent
    )


def child_version(step: WorkflowStep | LoopStep, parent_run: Run) -> Workflow:
    """The version a step runs: the active one, as approved with the parent."""
    depth = run_depth(parent_run) + 1
    if depth > max_depth():
        raise SubworkflowUnavailable(
            f"step `{step.id}` would nest workflow `{step.workflow}` {depth} levels deep; at "
            f"most {max_depth()} are allowed (FLOWPILOT_MAX_WORKFLOW_DEPTH)"
        )
    version = active_version(step.workflow)
    if version is None:
        raise SubworkflowUnavailable(
            f"step `{step.id}` runs workflow `{step.workflow}`, which has no active version"
        )
    pinned = (parent_run.workflow.workflow_pins or {}).get(step.workflow)
    validating = parent_run.trigger == RunTrigger.VALIDATION
    if pinned and pinned != version.definition_hash and not validating:
        raise SubworkflowUnavailable(
            f"workflow `{step.workflow}` changed since `{parent_run.workflow}` was approved "
            f"(v{version.version} is active now); re-approve `{parent_run.workflow}`"
        )
    return version


def run_depth(run: Run) -> int:
    """How many parent runs ``run`` has (0 for a top-level run)."""
    depth, parent_id = 0, run.parent_run_id
    while parent_id is not None and depth <= max_depth():
        depth += 1
        parent_id = Run.objects.filter(pk=parent_id).values_list("parent_run_id", flat=True)[0]
    return depth


def child_output(step: WorkflowStep | LoopStep, child: Run) -> Any:
    """The step's output from its finished child: the child's outputs, or the error."""
    if child.status == RunStatus.SUCCEEDED:
        outputs = store_unescape(child.outputs)
        if isinstance(outputs, dict) and outputs.get("_truncated") is True:
            raise SubworkflowFailed(
                f"step `{step.id}`: the outputs of child run {child.pk} were stored truncated "
                "(over FLOWPILOT_MAX_STORED_OUTPUT_BYTES); raise the limit"
            )
        return outputs if outputs is not None else {}
    raise SubworkflowFailed(child_failure(step.workflow, child))


def child_failure(workflow: str, child: Run) -> str:
    """What a failed or cancelled child run reports to its parent step."""
    if child.status == RunStatus.CANCELLED:
        return f"workflow `{workflow}` (child run {child.pk}) was cancelled"
    if child.status == RunStatus.WAITING:  # only in process: on Celery the step parks
        return (
            f"workflow `{workflow}` (child run {child.pk}) waits for an approval: in process "
            "(no broker) a step cannot wait for its child's approval; run it on the Celery "
            "workers, where the step waits for the child without holding a worker"
        )
    return f"workflow `{workflow}` (child run {child.pk}) failed: {child.error_summary}"


def plan_workflow_step(step: WorkflowStep, graph: FlowGraph, describe: Describe) -> list[str]:
    return [f"        runs workflow: {step.workflow} (its active version, as a child run)"]


KIND = StepKind(model=WorkflowStep, execute=execute_workflow_step, plan=plan_workflow_step)
