"""`loop` steps: run an active workflow as a child run once per iteration, until the
``until`` condition holds or ``max_iterations`` ran (docs/steps.md).

An iteration is one child run of the step (``Run.parent_step``), made with the machinery
of `workflow` steps (``runs.engine.kinds.workflow``): the pinned version, the depth
limit, a replay's recorded children, parking on Celery. Each iteration is its own
checkpoint: the step's iterations are its succeeded child runs, in order
(``finished_iterations``), so whatever re-runs the step — a retry, a resume, a Celery
task after each child — carries on after the last succeeded one and never runs it
again. A failed iteration fails the step (not retryable, as a `workflow` step's child);
a resume of the run resumes the failed child itself
(``runs.engine.subruns.child_prepare_resume``), and a step run again whose failed
child was not resumed starts that iteration afresh.

A run restarted from an iteration (``restartflow RUN --from STEP#K``,
``Run.restarted_from_step``) reuses iterations 1…K-1 of the restarted run's step: they
are never run again, and the next iteration reads the last of them as
``$loop.previous``.

The output: ``{"last": <the last iteration's outputs>, "count": N, "condition_held":
bool, "iterations": [<outputs of iteration 1>, …]}``, stored (capped and masked) like
any step's. At ``max_iterations`` without the condition holding the step fails with
``loop_exhausted`` (``on_exhausted: fail``, the default) or succeeds with
``condition_held: false``.

How the step waits on a child is a `workflow` step's: in process it drives each child
itself; on Celery it parks on it, and when a child succeeds
(``runs.engine.celery.children.parent_step_settle``) the step is queued again, and its
next task starts the next iteration or finishes the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.db import connection, transaction

from runs.engine.context import RunContext
from runs.engine.kinds.base import Attempt, Describe, StepKind
from runs.engine.kinds.workflow import (
    SubworkflowFailed,
    SubworkflowUnavailable,
    child_create,
    child_failure,
    child_output,
    current_child,
    park_on_child,
)
from runs.models import Run, StepResult
from runs.state import RunError, RunStatus, StepStatus
from tools.errors import FlowpilotError
from workflows.expressions import compile_condition
from workflows.graph import FlowGraph
from workflows.loops import UNTIL_NAMES, LoopReferenceError, parse_loop_reference, restart_point
from workflows.schema import LoopStep, WorkflowSpec

RESTART_POINT_CHARS = 64  # ``Run.restarted_from_step`` holds ``STEP#K``


class LoopRestartRefused(RunError):
    """A restart from ``STEP#K`` that cannot be: not a loop step, no such iteration."""

    code = "restart_refused"


class LoopExhausted(FlowpilotError):
    """``max_iterations`` ran and the condition never held (``on_exhausted: fail``)."""

    code = "loop_exhausted"


@dataclass(frozen=True)
class Iteration:
    """One finished iteration: its number (from 1), its child run and that run's outputs;
    ``reused``: taken over from the run this one restarted."""

    number: int
    run: Run
    outputs: Any
    reused: bool = False


def finished_iterations(step: LoopStep, result: StepResult) -> list[Iteration]:
    """The succeeded iterations of ``step``'s result, in order: those a restart from an
    iteration reused, then its own succeeded child runs. A result a restart copied
    (``reused``) has the iterations of the result it copies."""
    if result.reused and result.run.restarted_from_id is not None:
        original = StepResult.objects.filter(
            run_id=result.run.restarted_from_id, step_id=step.id
        ).first()
        return finished_iterations(step, original) if original is not None else []
    done = reused_iterations(step, result.run)
    children = Run.objects.filter(parent_step=result, status=RunStatus.SUCCEEDED).order_by("pk")
    for child in children.select_related("workflow"):
        done.append(Iteration(len(done) + 1, child, child_output(step, child)))
    return done


def reused_iterations(step: LoopStep, run: Run) -> list[Iteration]:
    """Iterations 1…K-1 of the restarted run's step, when ``run`` restarted from
    ``STEP#K`` of this step; else none."""
    if run.restarted_from_id is None or "#" not in run.restarted_from_step:
        return []
    point = restart_point(run.restarted_from_step)
    if point.step != step.id or point.iteration is None:
        return []
    source = StepResult.objects.filter(run_id=run.restarted_from_id, step_id=step.id).first()
    if source is None:
        return []
    earlier = finished_iterations(step, source)[: point.iteration - 1]
    return [replace(iteration, reused=True) for iteration in earlier]


def condition_holds(ctx: RunContext, step: LoopStep, iteration: Iteration) -> bool:
    """Whether ``until`` holds after ``iteration`` (compiled once per run)."""
    condition = ctx.compiled.get((step.id, "until")) or compile_loop_step(step)["until"]
    return bool(condition.evaluate({"output": iteration.outputs, "iteration": iteration.number}))


def loop_outcome(ctx: RunContext, step: LoopStep, done: list[Iteration]) -> Attempt | None:
    """The step's output once the loop is over (raises ``LoopExhausted`` per
    ``on_exhausted``); ``None`` while another iteration is due."""
    if not done:
        return None
    held = condition_holds(ctx, step, done[-1])
    if not held and len(done) < step.max_iterations:
        return None
    if not held and step.on_exhausted == "fail":
        raise LoopExhausted(
            f"step `{step.id}`: the condition `{step.until}` did not hold after "
            f"{len(done)} iterations (max_iterations {step.max_iterations}); set "
            "`on_exhausted: continue` to go on with the last iteration's outputs"
        )
    return Attempt(
        output={
            "last": done[-1].outputs,
            "count": len(done),
            "condition_held": held,
            "iterations": [iteration.outputs for iteration in done],
        }
    )


def iteration_inputs(step: LoopStep, args: dict[str, Any], done: list[Iteration]) -> dict[str, Any]:
    """The next iteration's child inputs: ``args`` (its input mapping), overlaid by its
    ``iteration_mapping`` where that is not null."""
    previous = done[-1].outputs if done else None
    inputs = dict(args)
    for name, value in step.iteration_mapping.items():
        found = parse_loop_reference(value).resolve(previous=previous, iteration=len(done) + 1)
        if found is not None:
            inputs[name] = found
    return inputs


def iteration_failure(step: LoopStep, number: int, child: Run) -> str:
    """What a failed or cancelled iteration reports to its loop step."""
    return f"step `{step.id}`, iteration {number}: {child_failure(step.workflow, child)}"


def _unfinished_child(result: StepResult) -> Run | None:
    """The newest child run of the step when it did not succeed (the iteration under
    way, or the one that failed)."""
    child = current_child(result)
    return None if child is None or child.status == RunStatus.SUCCEEDED else child


def execute_loop_step(ctx: RunContext, step: LoopStep, args: dict[str, Any]) -> Attempt:
    result = StepResult.objects.select_related("run__workflow").get(
        run_id=ctx.run_id, step_id=step.id
    )
    if ctx.run_child is None:
        return _park_or_finish(ctx, step, args, result)
    try:
        while True:
            done = finished_iterations(step, result)
            outcome = loop_outcome(ctx, step, done)
            if outcome is not None:
                return outcome
            child = _unfinished_child(result)
            if child is None or child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
                child = child_create(ctx, step, iteration_inputs(step, args, done), result)
            if child.status == RunStatus.RUNNING:
                raise SubworkflowUnavailable(
                    f"step `{step.id}`: the child run {child.pk} of iteration {len(done) + 1} "
                    f"is still running (its process died?); resume it with `resumeflow "
                    f"{child.pk} --force` first"
                )
            if child.status == RunStatus.PENDING:
                child = ctx.run_child(child)
            if child.status != RunStatus.SUCCEEDED:
                raise SubworkflowFailed(iteration_failure(step, len(done) + 1, child))
    finally:
        connection.close()  # this pool thread's own connection (a no-op on in-memory SQLite)


def _park_or_finish(
    ctx: RunContext, step: LoopStep, args: dict[str, Any], result: StepResult
) -> Attempt:
    """On Celery: finish the loop, or park the step on its next iteration's child."""
    done = finished_iterations(step, result)
    outcome = loop_outcome(ctx, step, done)
    if outcome is not None:
        return outcome
    child = _unfinished_child(result)
    with transaction.atomic():
        if child is None or child.status in (RunStatus.FAILED, RunStatus.CANCELLED):
            child = child_create(ctx, step, iteration_inputs(step, args, done), result)
        return park_on_child(step, result, child)


def loop_restart_step(run: Run, spec: WorkflowSpec, value: str) -> str:
    """Check a restart point ``STEP#K`` of finished ``run`` and return its step: a `loop`
    step whose iterations 1…K-1 succeeded in ``run`` (they are reused), K within its
    ``max_iterations``, and not past a loop that finished at K-1."""
    try:
        point = restart_point(value)
    except LoopReferenceError as exc:
        raise LoopRestartRefused(f"run {run.pk}: {exc.message}") from exc
    number = point.iteration or 1
    known = {step.id: step for step in spec.steps}
    step = known.get(point.step)
    if step is None:
        return point.step  # the caller names the steps there are
    if not isinstance(step, LoopStep):
        raise LoopRestartRefused(
            f"step `{step.id}` of run {run.pk} is a `{step.kind}` step; only a `loop` step "
            f"restarts from an iteration (`--from {step.id}` restarts the step)"
        )
    if len(value) > RESTART_POINT_CHARS:
        raise LoopRestartRefused(
            f"`{value}` is longer than {RESTART_POINT_CHARS} characters and cannot be recorded "
            "as the restart point; restart from the step instead"
        )
    result = StepResult.objects.filter(run=run, step_id=step.id).first()
    done = finished_iterations(step, result) if result is not None else []
    last = min(len(done) + 1, step.max_iterations)
    if number > last:
        raise LoopRestartRefused(
            f"step `{step.id}` of run {run.pk} cannot restart from iteration {number}: "
            f"{len(done)} of its iterations succeeded (max_iterations "
            f"{step.max_iterations}); restart from iteration 1 to {last}"
        )
    if (
        number == len(done) + 1
        and done
        and result is not None
        and result.status == StepStatus.SUCCEEDED
    ):
        raise LoopRestartRefused(
            f"step `{step.id}` of run {run.pk} finished after iteration {len(done)}; there is "
            f"no iteration {number} to restart from (restart from 1 to {len(done)})"
        )
    return step.id


def restart_points(run: Run, spec: WorkflowSpec, order: tuple[str, ...]) -> tuple[str, ...]:
    """Every step of ``order``, each `loop` step followed by the iterations of ``run`` it
    can restart from past the first (``review#2``…), for the admin's restart page."""
    results = {r.step_id: r for r in run.step_results.all()}
    points: list[str] = []
    for step_id in order:
        points.append(step_id)
        step, result = spec.step(step_id), results.get(step_id)
        if not isinstance(step, LoopStep) or result is None:
            continue
        done = len(finished_iterations(step, result))
        last = min(done + (result.status != StepStatus.SUCCEEDED), step.max_iterations)
        points += [f"{step_id}#{number}" for number in range(2, last + 1)]
    return tuple(points)


def compile_loop_step(step: LoopStep) -> dict[str, Any]:
    """Its ``until`` condition."""
    return {"until": compile_condition(step.until, names=UNTIL_NAMES)}


def plan_loop_step(step: LoopStep, graph: FlowGraph, describe: Describe) -> list[str]:
    lines = [
        f"        loops over workflow: {step.workflow} (its active version, one child run "
        "per iteration)",
        f"        until: {step.until} (at most {step.max_iterations} iterations; then "
        f"{'fail' if step.on_exhausted == 'fail' else 'continue'})",
    ]
    lines += [f"          {name} = {value}" for name, value in step.iteration_mapping.items()]
    return lines


KIND = StepKind(
    model=LoopStep, execute=execute_loop_step, compile=compile_loop_step, plan=plan_loop_step
)
