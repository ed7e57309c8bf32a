"""Restarting a finished run from a chosen step, or from its trigger: a new, linked run.

``run_restart(run=…, from_step="geo")`` records a **new run** of the same pinned
version with the same inputs, linked to the original (``Run.restarted_from`` and
``restarted_from_step``; the original lists it under ``restarts``). The chosen step
and every step downstream of it run again; every other step's checkpoint is copied
into the new run as a *reused* result and never executed. Without ``from_step`` it
is a full re-run with the same inputs (nothing reused), still linked. ``from_step``
``"STEP#K"`` restarts a `loop` step from its iteration K, reusing iterations 1…K-1
(``runs.engine.kinds.loop``).

A step outside the chosen set is reused only when its result can stand for it: it
succeeded, or failed under ``on_error: continue``. Any other one (never reached,
failed the run, skipped because the run ended or its branch was not taken) is
pending in the new run, like a resume: it runs if the run reaches it, or is skipped
again. Those steps are part of the re-run set as well.

Refused, with a message naming the run and the step: a run not finished (pending or
running), an unknown step, a version that is archived or whose definition changed
since the run, a tool changed since approval (``tool_changed``, from ``run_create``),
a re-run step reading a reused output stored as a truncated preview, and — unless
``confirm_non_idempotent`` — a re-run set holding a step whose tool is not
idempotent (it may act twice on the target system; its idempotency key is the new
run's).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from runs.engine.kinds.loop import loop_restart_step
from runs.engine.local import Observer
from runs.models import Run, StepResult
from runs.services import OPERATE_PERMISSION, run_create, run_enqueue
from runs.state import RUN_TERMINAL, RunError, RunStateError, RunTrigger, StepStatus
from tools.permissions import permission_require
from tools.registry import ToolRegistry
from workflows.graph import FlowGraph, build_graph
from workflows.models import WorkflowStatus
from workflows.schema import WorkflowSpec
from workflows.services import workflow_spec

__all__ = [
    "RestartNeedsConfirmation",
    "RestartPlan",
    "RestartRefused",
    "RestartStepUnknown",
    "restart_plan",
    "run_restart",
    "run_restart_prepare",
]


class RestartRefused(RunError):
    code = "restart_refused"


class RestartStepUnknown(RestartRefused):
    """The step to restart from is not a step of the run's version."""

    code = "unknown_step"


class RestartNeedsConfirmation(RunError):
    """The re-run set holds non-idempotent steps and the caller did not confirm."""

    code = "restart_needs_confirmation"

    def __init__(self, message: str, *, steps: tuple[str, ...]) -> None:
        super().__init__(message)
        self.steps = steps


@dataclass(frozen=True)
class RestartPlan:
    """What a restart would do: steps run again and steps reused, in graph order."""

    run: Run
    from_step: str | None
    rerun: tuple[str, ...]
    reused: tuple[str, ...]
    non_idempotent: dict[str, tuple[str, ...]]  # re-run step → its non-idempotent tools


def restart_plan(
    *, run: Run, from_step: str | None = None, registry: ToolRegistry | None = None
) -> RestartPlan:
    """Check that ``run`` can restart from ``from_step`` and say what would run again.

    Raises ``RunStateError`` (the run is not finished) or ``RestartRefused``.
    """
    point = from_step
    if run.status not in RUN_TERMINAL:
        raise RunStateError(
            f"run {run.pk} is {run.status}; only a finished run (succeeded, failed or "
            "cancelled) restarts — wait for it, or cancel it first"
        )
    version = run.workflow
    if version.status == WorkflowStatus.ARCHIVED:
        raise RestartRefused(
            f"run {run.pk} ran `{version}`, which is archived; its runs are not restarted "
            "(run the active version instead)"
        )
    if version.definition_hash != run.definition_hash:
        raise RestartRefused(
            f"run {run.pk} ran a definition of `{version}` that has changed since "
            f"({run.definition_hash[:12]} → {version.definition_hash[:12]}); it cannot restart"
        )
    spec = workflow_spec(version)
    graph = build_graph(spec)
    if from_step is not None and "#" in from_step:  # `STEP#K`: from a loop's iteration
        from_step = loop_restart_step(run, spec, from_step)
    if from_step is not None and from_step not in graph.step_ids:
        raise RestartStepUnknown(
            f"run {run.pk} of `{version}` has no step `{from_step}`; its steps are "
            + ", ".join(f"`{s}`" for s in graph.order)
        )
    results = {r.step_id: r for r in run.step_results.all()}
    chosen = set(graph.step_ids) if from_step is None else _downstream(graph, from_step)
    reused = tuple(s for s in graph.order if s not in chosen and _reusable(spec, results.get(s)))
    rerun = tuple(s for s in graph.order if s not in reused)
    _refuse_truncated(run, graph, results, rerun, reused)
    registry = registry if registry is not None else ToolRegistry.from_db()
    risky = {s: tools for s in rerun if (tools := _non_idempotent_tools(spec, registry, s))}
    return RestartPlan(run, point, rerun, reused, risky)


def run_restart_prepare(
    *,
    run: Run,
    from_step: str | None = None,
    confirm_non_idempotent: bool = False,
    trigger: str = RunTrigger.MANUAL,
    actor: Any = None,
    registry: ToolRegistry | None = None,
) -> Run:
    """Record the new, linked run (pending) with the reused results copied in.

    ``actor`` needs ``runs.operate_run`` (None: an operator's command). The new run
    is validated like any run (``run_create``: the registry, the inputs, the tool
    pins). Start it with ``run_enqueue`` / ``run_execute``; ``run_restart`` does both.
    """
    where = "from the trigger" if from_step is None else f"from step `{from_step}`"
    permission_require(
        actor=actor, permission=OPERATE_PERMISSION, action=f"restart run {run.pk} {where}"
    )
    registry = registry if registry is not None else ToolRegistry.from_db()
    plan = restart_plan(run=run, from_step=from_step, registry=registry)
    if plan.non_idempotent and not confirm_non_idempotent:
        raise RestartNeedsConfirmation(
            _confirmation_message(plan), steps=tuple(plan.non_idempotent)
        )
    originals = {r.step_id: r for r in run.step_results.filter(step_id__in=plan.reused)}
    return run_create(
        workflow=run.workflow,
        trigger=trigger,
        inputs=run.inputs,
        registry=registry,
        restarted_from=run,
        restarted_from_step=from_step or "",
        reuse=originals,
    )


def run_restart(
    *,
    run: Run,
    from_step: str | None = None,
    confirm_non_idempotent: bool = False,
    trigger: str = RunTrigger.MANUAL,
    actor: Any = None,
    observer: Observer | None = None,
) -> Run:
    """Restart ``run`` from ``from_step`` (None: from the trigger) as a new run and
    enqueue it: on the Celery workers with a broker, else in this process (it comes
    back finished). See the module doc for what is reused and what is refused."""
    again = run_restart_prepare(
        run=run,
        from_step=from_step,
        confirm_non_idempotent=confirm_non_idempotent,
        trigger=trigger,
        actor=actor,
    )
    return run_enqueue(run=again, observer=observer)


def _downstream(graph: FlowGraph, step_id: str) -> set[str]:
    """``step_id`` and every step with a path from it."""
    seen = {step_id}
    queue = deque(graph.children[step_id])
    while queue:
        node = queue.popleft()
        if node not in seen:
            seen.add(node)
            queue.extend(graph.children[node])
    return seen


def _reusable(spec: WorkflowSpec, result: StepResult | None) -> bool:
    if result is None:
        return False
    if result.status == StepStatus.SUCCEEDED:
        return True
    return result.status == StepStatus.FAILED and spec.step(result.step_id).on_error == "continue"


def _refuse_truncated(
    run: Run,
    graph: FlowGraph,
    results: dict[str, StepResult],
    rerun: Iterable[str],
    reused: tuple[str, ...],
) -> None:
    """A re-run step cannot read a reused output kept only as a capped preview."""
    for step_id in rerun:
        for parent in graph.parents[step_id]:
            if parent in reused and results[parent].output_truncated:
                raise RestartRefused(
                    f"step `{step_id}` reads the output of `{parent}`, which run {run.pk} "
                    "stored truncated (over FLOWPILOT_MAX_STORED_OUTPUT_BYTES); restart from "
                    f"`{parent}` instead, or from the trigger"
                )


def _non_idempotent_tools(
    spec: WorkflowSpec, registry: ToolRegistry, step_id: str
) -> tuple[str, ...]:
    step = spec.step(step_id)
    names = sorted({*step.direct_tools(), *step.model_tools()})
    return tuple(
        name for name in names if (tool := registry.get(name)) is not None and not tool.idempotent
    )


def _confirmation_message(plan: RestartPlan) -> str:
    steps = ", ".join(
        f"`{step}` (tool {', '.join(f'`{t}`' for t in tools)})"
        for step, tools in plan.non_idempotent.items()
    )
    where = "from the trigger" if plan.from_step is None else f"from `{plan.from_step}`"
    return (
        f"restarting run {plan.run.pk} {where} runs again {steps}, which "
        f"{'is' if len(plan.non_idempotent) == 1 else 'are'} not idempotent: the target "
        "system may act a second time. Check it, then confirm (--yes; in the admin, the "
        'confirmation box; over the API, "confirm": true)'
    )
