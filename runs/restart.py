"""Restarting a finished run from a chosen step, or from its trigger: a new, linked run.

``run_restart(run=…, from_step="geo")`` records a **new run** with the same inputs,
linked to the original (``Run.restarted_from`` and ``restarted_from_step``; the
original lists it under ``restarts``). The chosen step and every step downstream of
it run again; every other step's checkpoint is copied into the new run as a *reused*
result and never executed. Without ``from_step`` it is a full re-run with the same
inputs (nothing reused), still linked. ``from_step``
``"STEP#K"`` restarts a `loop` step from its iteration K, reusing iterations 1…K-1
(``runs.engine.kinds.loop``); onto another version only when the loop step is unchanged.

**Onto another version** (``version``: ``restartflow --flow-version N``): the new run
runs ``version``, an active version of the same workflow (the original's own version
may be archived by then: its checkpoint is only read). A step of the new version is
*unchanged* when the original version has a step of the same id with the same
definition, the same incoming edges and the same pinned hashes of the tools (and
child workflows) it calls; every other step is *changed*, and changed steps run again
with their descendants, besides the chosen step's. The new run keeps the original's
inputs the new version declares (a new required input is a refusal, not a guess).

A step outside the re-run set is reused only when its result can stand for it: it
succeeded, or failed under ``on_error: continue``. Any other one (never reached,
failed the run, skipped because the run ended or its branch was not taken) is
pending in the new run, like a resume: it runs if the run reaches it, or is skipped
again. Those steps are part of the re-run set as well.

**Progress carried** (``RestartPlan.carried``): a re-run step whose kind carries
progress (``StepKind.carry``: a `foreach` runs only the items that did not succeed)
starts from the original's result when that step is unchanged, every step it reads
is reused and every run input it reads has the original's value (its arguments are
then the same): the original's output is seeded into the
new run's pending row. A step downstream of a re-run step starts from nothing.

Refused, with a message naming the run and the step: a run not finished (pending or
running), an unknown step, a run's version that is archived (unless restarted onto
another version) or whose definition changed since the run, a target version of
another workflow or not active, a tool changed since approval (``tool_changed``, from
``run_create``), and — unless ``confirm_non_idempotent`` — a re-run set holding a step
whose tool is not idempotent (it may act twice on the target system; its idempotency
key is the new run's). Where a reused output does not fit the new run, every misfit is
named in one ``RestartUnfit``: a re-run step reading a reused output stored as a
truncated preview, a run input the version requires that the run did not have, and a
reference of a re-run step, new in this version, to a path the reused output lacks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from runs.engine.kinds import KINDS
from runs.engine.kinds.loop import loop_restart_step
from runs.engine.local import Observer
from runs.models import Run, StepResult
from runs.services import OPERATE_PERMISSION, run_create, run_enqueue
from runs.state import RUN_TERMINAL, RunError, RunStateError, RunTrigger, StepStatus
from tools.jsondata import store_unescape
from tools.paths import MISSING, walk
from tools.permissions import permission_require
from tools.registry import ToolRegistry
from workflows.graph import FlowGraph, build_graph, step_references
from workflows.inputs import InputsInvalid, resolve_inputs
from workflows.models import Workflow, WorkflowStatus
from workflows.references import InputRef, StepRef, iter_refs
from workflows.schema import WorkflowSpec
from workflows.services import workflow_spec

__all__ = [
    "RestartNeedsConfirmation",
    "RestartPlan",
    "RestartRefused",
    "RestartStepUnknown",
    "RestartUnfit",
    "RestartVersionRefused",
    "restart_plan",
    "restart_version",
    "run_restart",
    "run_restart_prepare",
]


class RestartRefused(RunError):
    code = "restart_refused"


class RestartStepUnknown(RestartRefused):
    """The step to restart from is not a step of the run's version."""

    code = "unknown_step"


class RestartVersionRefused(RestartRefused):
    """The version to restart onto is of another workflow, or not active."""

    code = "restart_version_refused"


class RestartUnfit(RestartRefused):
    """Reused outputs or inputs do not fit the new run: ``problems`` names every one."""

    code = "restart_unfit"

    def __init__(self, run: Run, problems: list[str]) -> None:
        super().__init__(
            f"run {run.pk} cannot restart as asked: "
            + "; ".join(problems)
            + ". Restart from an earlier step (its output is then made again), or from "
            "the trigger"
        )
        self.problems = problems

    def as_dict(self) -> dict:
        return {**super().as_dict(), "problems": self.problems}


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
    version: Workflow | None = None  # the version the new run runs (None: the run's)
    changed: tuple[str, ...] = ()  # steps of ``version`` new or changed since the run's
    # Re-run step → (units of work kept, of how many): a foreach's succeeded items.
    carried: dict[str, tuple[int, int]] = field(default_factory=dict)
    inputs: dict[str, Any] | None = None  # the new run's inputs (None: the run's)

    @property
    def target(self) -> Workflow:
        """The version the new run runs."""
        return self.version if self.version is not None else self.run.workflow


def restart_plan(
    *,
    run: Run,
    from_step: str | None = None,
    registry: ToolRegistry | None = None,
    version: Workflow | None = None,
) -> RestartPlan:
    """Check that ``run`` can restart from ``from_step`` (onto ``version``: None, or
    the run's own, for the same version) and say what would run again.

    Raises ``RunStateError`` (the run is not finished) or ``RestartRefused``.
    """
    point = from_step
    if run.status not in RUN_TERMINAL:
        raise RunStateError(
            f"run {run.pk} is {run.status}; only a finished run (succeeded, failed or "
            "cancelled) restarts — wait for it, or cancel it first"
        )
    original = run.workflow
    target = _target_version(run, version)
    if original.definition_hash != run.definition_hash:
        raise RestartRefused(
            f"run {run.pk} ran a definition of `{original}` that has changed since "
            f"({run.definition_hash[:12]} → {original.definition_hash[:12]}); it cannot restart"
        )
    before = workflow_spec(original)
    spec = before if target.pk == original.pk else workflow_spec(target)
    graph = build_graph(spec)
    if from_step is not None and "#" in from_step:  # `STEP#K`: from a loop's iteration
        from_step = loop_restart_step(run, spec, from_step)
    if from_step is not None and from_step not in graph.step_ids:
        whose = f"run {run.pk} of `{target}`" if target.pk == original.pk else f"`{target}`"
        raise RestartStepUnknown(
            f"{whose} has no step `{from_step}`; its steps are "
            + ", ".join(f"`{s}`" for s in graph.order)
        )
    changed: tuple[str, ...] = ()
    if target.pk != original.pk:
        changed = _changed_steps(original, before, target, spec, graph)
    if point != from_step and from_step in changed:
        raise RestartVersionRefused(
            f"loop step `{from_step}` changed in `{target}`, so the iterations run {run.pk} "
            f"made are not its iterations; restart from the step (`{from_step}`) instead"
        )
    results = {r.step_id: r for r in run.step_results.all()}
    chosen = set(graph.step_ids) if from_step is None else _downstream(graph, from_step)
    for step_id in changed:
        chosen |= _downstream(graph, step_id)
    reused = tuple(s for s in graph.order if s not in chosen and _reusable(spec, results.get(s)))
    rerun = tuple(s for s in graph.order if s not in reused)
    inputs = None if target.pk == original.pk else _carried_inputs(run, spec)
    problems = _truncated_reads(graph, results, rerun, reused)
    if target.pk != original.pk:
        problems += _input_problems(run, target, spec, inputs or {})
        problems += _unfit_reads(before, spec, results, rerun, reused)
    if problems:
        raise RestartUnfit(run, problems)
    registry = registry if registry is not None else ToolRegistry.from_db()
    risky = {s: tools for s in rerun if (tools := _non_idempotent_tools(spec, registry, s))}
    same_inputs = _same_inputs(run, spec, inputs)
    carried = _carried(spec, graph, results, rerun, reused, changed, same_inputs)
    return RestartPlan(
        run, point, rerun, reused, risky,
        version=None if target.pk == original.pk else target,
        changed=changed, carried=carried, inputs=inputs,
    )  # fmt: skip


def restart_version(run: Run, number: int) -> Workflow:
    """Version ``number`` of the run's workflow; ``RestartVersionRefused`` when none."""
    found = Workflow.objects.filter(name=run.workflow.name, version=number).first()
    if found is None:
        versions = Workflow.objects.filter(name=run.workflow.name).order_by("version")
        raise RestartVersionRefused(
            f"workflow `{run.workflow.name}` has no version {number} (its versions: "
            + ", ".join(f"{v.version} ({v.status})" for v in versions)
            + ")"
        )
    return found


def restart_versions(run: Run) -> list[Workflow]:
    """The versions a restart of ``run`` may run, by number: its own and every active
    version of its workflow."""
    versions = Workflow.objects.filter(name=run.workflow.name).filter(
        Q(pk=run.workflow_id) | Q(status=WorkflowStatus.ACTIVE)
    )
    return list(versions.order_by("version"))


def _target_version(run: Run, version: Workflow | None) -> Workflow:
    """The version the new run runs: ``version`` when it may, else the run's own."""
    original = run.workflow
    if version is None or version.pk == original.pk:
        if original.status == WorkflowStatus.ARCHIVED:
            active = (
                Workflow.objects.filter(name=original.name, status=WorkflowStatus.ACTIVE)
                .order_by("-version")
                .first()
            )
            hint = (
                f"restart it onto the active version (--flow-version {active.version})"
                if active is not None
                else "there is no active version to restart it onto"
            )
            raise RestartRefused(
                f"run {run.pk} ran `{original}`, which is archived; its runs are not "
                f"restarted on it: {hint}"
            )
        return original
    if version.name != original.name:
        raise RestartVersionRefused(
            f"run {run.pk} ran workflow `{original.name}`; it restarts only onto a version "
            f"of it, not onto `{version}`"
        )
    if version.status != WorkflowStatus.ACTIVE:
        raise RestartVersionRefused(
            f"`{version}` is {version.status}; a run restarts only onto an active "
            "(approved) version"
        )
    return version


def _changed_steps(
    original: Workflow, before: WorkflowSpec, target: Workflow, spec: WorkflowSpec,
    graph: FlowGraph,
) -> tuple[str, ...]:  # fmt: skip
    """Steps of ``spec`` (``target``'s) that are new or differ from ``before``'s: their
    definition, their incoming edges, or a pin of a tool or child workflow they call."""
    old_graph = build_graph(before)
    old_ids = set(old_graph.step_ids)
    changed = []
    for step_id in graph.order:
        step = spec.step(step_id)
        same = (
            step_id in old_ids
            and before.step(step_id).model_dump(mode="json") == step.model_dump(mode="json")
            and _incoming(old_graph, step_id) == _incoming(graph, step_id)
            and all(
                original.tool_pins.get(t) == target.tool_pins.get(t)
                for t in {*step.direct_tools(), *step.model_tools()}
            )
            and (
                (child := step.called_workflow()) is None
                or original.workflow_pins.get(child) == target.workflow_pins.get(child)
            )
        )
        if not same:
            changed.append(step_id)
    return tuple(changed)


def _incoming(graph: FlowGraph, step_id: str) -> set[tuple[str, str | None]]:
    return {(e.source, e.when) for e in graph.incoming(step_id)}


def _carried_inputs(run: Run, spec: WorkflowSpec) -> dict[str, Any]:
    """The run's inputs the new version declares (an unset optional one left out, so the
    version's default applies)."""
    return {k: v for k, v in run.inputs.items() if k in spec.inputs and v is not None}


def _input_problems(
    run: Run, target: Workflow, spec: WorkflowSpec, inputs: dict[str, Any]
) -> list[str]:
    try:
        resolve_inputs(spec.inputs, inputs)
    except InputsInvalid as exc:
        return [
            f"run input `{name}` of `{target}`: {problem}" if name else problem
            for problem, name in zip(exc.problems, exc.fields, strict=True)
        ]
    return []


def _unfit_reads(
    before: WorkflowSpec,
    spec: WorkflowSpec,
    results: dict[str, StepResult],
    rerun: Iterable[str],
    reused: tuple[str, ...],
) -> list[str]:
    """References of re-run steps, new in this version, to a path a reused output lacks
    (a missing path would read as null)."""
    old_ids = {s.id for s in before.steps}
    new_ids = {s.id for s in spec.steps}
    problems = []
    for step_id in rerun:
        step = spec.step(step_id)
        refs = _step_refs(step, new_ids)
        if step_id in old_ids:
            refs -= _step_refs(before.step(step_id), old_ids)  # read in the run already
        for ref in sorted(refs, key=str):
            if ref.step_id not in reused or not ref.path:
                continue
            stored = results[ref.step_id]
            if stored.output_truncated:
                continue  # named by _truncated_reads
            view = store_unescape(
                stored.output if stored.status == StepStatus.SUCCEEDED else {"error": stored.error}
            )
            if walk(view, ref.path) is MISSING:
                problems.append(
                    f"step `{step_id}` now reads `{ref}`, but the output of `{ref.step_id}` "
                    f"that run {results[ref.step_id].run_id} stored (reused, as the step is "
                    f"unchanged) has no `{'.'.join(ref.path)}`"
                )
    return problems


def _step_refs(step: Any, step_ids: set[str]) -> set[StepRef]:
    parsed = step_references(step, step_ids)
    return {ref for ref in iter_refs(parsed) if isinstance(ref, StepRef)}


def _same_inputs(run: Run, spec: WorkflowSpec, inputs: dict[str, Any] | None) -> set[str]:
    """The run inputs whose value in the new run is the original's (an input whose
    default the new version changed is not)."""
    if inputs is None:
        return set(run.inputs)
    resolved = resolve_inputs(spec.inputs, inputs)  # checked by _input_problems already
    return {k for k, v in resolved.items() if k in run.inputs and run.inputs[k] == v}


def _carried(
    spec: WorkflowSpec,
    graph: FlowGraph,
    results: dict[str, StepResult],
    rerun: tuple[str, ...],
    reused: tuple[str, ...],
    changed: tuple[str, ...],
    same_inputs: set[str],
) -> dict[str, tuple[int, int]]:
    """Re-run steps that start from the original's progress: unchanged, every step and
    run input they read as it was, and a result whose progress their kind keeps."""
    carried = {}
    kept = set(reused)
    ids = set(graph.step_ids)
    for step_id in rerun:
        step = spec.step(step_id)
        result, kind = results.get(step_id), KINDS[step.kind]
        if result is None or step_id in changed or not kind.carries:
            continue
        if result.output is None or result.output_truncated:
            continue
        if not set(graph.parents[step_id]) <= kept:
            continue
        read = {r.name for r in iter_refs(step_references(step, ids)) if isinstance(r, InputRef)}
        if not read <= same_inputs:
            continue
        progress = kind.progress(store_unescape(result.output))
        if progress is not None:
            carried[step_id] = progress
    return carried


def run_restart_prepare(
    *,
    run: Run,
    from_step: str | None = None,
    confirm_non_idempotent: bool = False,
    trigger: str = RunTrigger.MANUAL,
    actor: Any = None,
    registry: ToolRegistry | None = None,
    version: Workflow | None = None,
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
    plan = restart_plan(run=run, from_step=from_step, registry=registry, version=version)
    if plan.non_idempotent and not confirm_non_idempotent:
        raise RestartNeedsConfirmation(
            _confirmation_message(plan), steps=tuple(plan.non_idempotent)
        )
    wanted = {*plan.reused, *plan.carried}
    originals = {r.step_id: r for r in run.step_results.filter(step_id__in=wanted)}
    return run_create(
        workflow=plan.target,
        trigger=trigger,
        inputs=run.inputs if plan.inputs is None else plan.inputs,
        registry=registry,
        restarted_from=run,
        restarted_from_step=from_step or "",
        reuse={s: originals[s] for s in plan.reused},
        progress={s: originals[s] for s in plan.carried},
        started_by=actor,
    )


def run_restart(
    *,
    run: Run,
    from_step: str | None = None,
    confirm_non_idempotent: bool = False,
    trigger: str = RunTrigger.MANUAL,
    actor: Any = None,
    observer: Observer | None = None,
    version: Workflow | None = None,
) -> Run:
    """Restart ``run`` from ``from_step`` (None: from the trigger), onto ``version``
    (None: its own), as a new run and enqueue it: on the Celery workers with a broker,
    else in this process (it comes back finished). See the module doc for what is
    reused and what is refused."""
    again = run_restart_prepare(
        run=run,
        from_step=from_step,
        confirm_non_idempotent=confirm_non_idempotent,
        trigger=trigger,
        actor=actor,
        version=version,
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


def _truncated_reads(
    graph: FlowGraph,
    results: dict[str, StepResult],
    rerun: Iterable[str],
    reused: tuple[str, ...],
) -> list[str]:
    """A re-run step cannot read a reused output kept only as a capped preview."""
    return [
        f"step `{step_id}` reads the output of `{parent}`, which run "
        f"{results[parent].run_id} stored truncated (over FLOWPILOT_MAX_STORED_OUTPUT_BYTES); "
        f"restart from `{parent}` instead"
        for step_id in rerun
        for parent in graph.parents[step_id]
        if parent in reused and results[parent].output_truncated
    ]


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
        f"`{step}` (tool {', '.join(f'`{t}`' for t in tools)}{_items_note(plan, step)})"
        for step, tools in plan.non_idempotent.items()
    )
    where = "from the trigger" if plan.from_step is None else f"from `{plan.from_step}`"
    if plan.version is not None:
        where += f" onto `{plan.version}`"
    return (
        f"restarting run {plan.run.pk} {where} runs again {steps}, which "
        f"{'is' if len(plan.non_idempotent) == 1 else 'are'} not idempotent: the target "
        "system may act a second time. Check it, then confirm (--yes; in the admin, the "
        'confirmation box; over the API, "confirm": true)'
    )


def _items_note(plan: RestartPlan, step_id: str) -> str:
    if step_id not in plan.carried:
        return ""
    kept, total = plan.carried[step_id]
    return f"; {total - kept} of {total} items"
