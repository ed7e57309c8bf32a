"""Replaying a version offline against its validation run's recorded calls.

``version_replay`` is the workflow's regression test: a new run of ``version``
(trigger ``replay``, ``Run.replay_of`` = the validation run) with the validation
run's inputs, executed in this process with every call answered from the recordings
(``runs.replay.player``): HTTP exchanges, MCP tool calls and the model calls of
``llm`` steps and LLM decisions. Nothing is sent, no MCP server is started and no LLM
endpoint is called, so it works with all of them down; built-in tools run as they
always do (they are local) but write no file. Then each step is compared with the
validation run (``runs.replay.report``). Retries do not wait (the recorded answers
are already there). A replay run announces nothing: no run-finished hook hears of it
(``runs.engine.finish.run_finished_announce``), so it sends no report.

Sub-workflows: a ``workflow`` step runs its child as a replay child — a child run
(trigger ``replay``, ``replay_of`` = the validation run's child run of that step) of
the pinned child version, executed here against the recordings of that child run,
and so on down for nested ones. A step whose validation run started no child fails
(``replay_unrecorded``): nothing is run for real. The report lists the child's own
differing steps under the parent step (``child.<step>.…``). A ``loop`` step's
iteration N runs as a replay child of the validation run's child of iteration N, so
every iteration replays.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from runs.engine.build import build_run_context
from runs.engine.creation import child_run_create
from runs.engine.kinds.loop import finished_iterations
from runs.engine.kinds.workflow import current_child
from runs.models import Run, StepResult
from runs.replay.player import NOT_SENT, RecordedCalls, ReplayUnrecorded
from runs.replay.report import ReplayReport, replay_report
from runs.services import OPERATE_PERMISSION, run_create, run_execute
from runs.state import RunError, RunStatus, RunTrigger
from tools.permissions import permission_require
from tools.registry import ToolRegistry
from workflows.models import Workflow
from workflows.schema import LoopStep, WorkflowStep
from workflows.services import workflow_spec


class ReplayRefused(RunError):
    code = "replay_refused"


def replay_source(*, version: Workflow, validation_run: Run | None = None) -> Run:
    """The validation run to replay against: the one given (it must be a validation
    run of ``version``), else the newest succeeded validation run of ``version``."""
    if validation_run is not None:
        if validation_run.trigger != RunTrigger.VALIDATION or validation_run.workflow_id != (
            version.pk
        ):
            raise ReplayRefused(
                f"run {validation_run.pk} is not a validation run of `{version}`; only a "
                "validation run's recorded calls are replayed"
            )
        return validation_run
    found = (
        Run.objects.filter(
            workflow=version, trigger=RunTrigger.VALIDATION, status=RunStatus.SUCCEEDED
        )
        .order_by("-finished_at", "-pk")
        .first()
    )
    if found is None:
        raise ReplayRefused(
            f"`{version}` has no succeeded validation run to replay against; approve it "
            "(its validation run records every tool call)"
        )
    return found


def version_replay(
    *, version: Workflow, validation_run: Run | None = None, actor: Any = None
) -> ReplayReport:
    """Replay ``version`` offline against a validation run; see the module doc.

    ``actor`` needs ``runs.operate_run`` (None: an operator's command). Raises
    ``ReplayRefused``, or what ``run_create`` raises for a version that no longer
    validates against the registry.
    """
    permission_require(actor=actor, permission=OPERATE_PERMISSION, action=f"replay {version}")
    source = replay_source(version=version, validation_run=validation_run)
    registry = ToolRegistry.from_db()
    run = run_create(
        workflow=version,
        trigger=RunTrigger.REPLAY,
        inputs=source.inputs,
        registry=registry,
        replay_of=source,
        started_by=actor,
    )
    replay = _Replay(registry)
    run = replay.execute(run, source)
    return replay_report(
        replay_run=run, source_run=source, unused=replay.unused_of(run), unused_by_run=replay.unused
    )


def replay_execute(*, run: Run, source: Run, registry: ToolRegistry) -> Run:
    """Execute ``run`` (made by ``run_create(trigger="replay", replay_of=source)``) here,
    offline, against ``source``'s recordings; its children too (a test scenario's run)."""
    return _Replay(registry).execute(run, source)


@dataclass
class _Replay:
    """One replay: its runs (the top one and its replay children) executed here, each
    against the recordings of the run it replays, and what each left unused."""

    registry: ToolRegistry
    unused: dict[int, dict[str, list[str]]] = field(default_factory=dict)  # by replay run
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def execute(self, run: Run, source: Run) -> Run:
        """Execute replay run ``run`` in this thread against ``source``'s recordings."""
        calls = RecordedCalls.of(source)
        context = build_run_context(
            run_id=run.pk,
            run_uuid=str(run.uuid),
            spec=workflow_spec(run.workflow),
            registry=self.registry,
            taps=calls,
            sleep=lambda seconds: None,
        )
        context.shown_run_id = source.pk  # a report it writes names the run it replays
        context.run_child = self.run_child
        context.create_child = lambda step, args, parent: self.create_child(
            source, step, args, parent
        )
        with context as ctx:
            if ctx.breakers is not None:  # no network: no host's breaker may refuse a call
                ctx.breakers.close()
                ctx.breakers = None
            run = run_execute(run=run, context=ctx)
        with self._lock:
            self.unused[run.pk] = calls.unused()
        return run

    def unused_of(self, run: Run) -> dict[str, list[str]]:
        with self._lock:
            return self.unused.get(run.pk, {})

    def create_child(
        self, source: Run, step: WorkflowStep | LoopStep, args: dict[str, Any], parent: StepResult
    ) -> Run:
        """The replay child of ``step``: the validation run's child of that step (its
        newest, whose outputs the step had) is what it replays."""
        recorded = _recorded_child(source, step, parent)
        return child_run_create(
            workflow=_pinned_version(source, step, recorded),
            inputs=args,
            registry=self.registry,
            parent_step=parent,
            replay_of=recorded,
        )

    def run_child(self, child: Run) -> Run:
        if child.replay_of is None:  # created by ``create_child``: never
            raise ReplayRefused(f"run {child.pk} replays no recorded run; it was not started")
        return self.execute(child, child.replay_of)


def _recorded_child(source: Run, step: WorkflowStep | LoopStep, parent: StepResult) -> Run:
    result = StepResult.objects.filter(run=source, step_id=step.id).first()
    if isinstance(step, LoopStep):  # the recorded child of the iteration it starts
        return _recorded_iteration(source, step, result, parent)
    child = current_child(result) if result is not None else None
    if child is None:
        raise ReplayUnrecorded(
            f"step `{step.id}` runs workflow `{step.workflow}`, but run {source.pk} (replayed) "
            f"recorded no child run of this step; the child was not run ({NOT_SENT})"
        )
    return child


def _recorded_iteration(
    source: Run, step: LoopStep, result: StepResult | None, parent: StepResult
) -> Run:
    """The child run that served iteration N of the replayed loop, N being the iteration
    the replay's loop starts now (one past its succeeded ones)."""
    number = len(finished_iterations(step, parent)) + 1
    recorded = finished_iterations(step, result) if result is not None else []
    if number > len(recorded):
        raise ReplayUnrecorded(
            f"loop `{step.id}` starts iteration {number}, but run {source.pk} (replayed) "
            f"recorded {len(recorded)} succeeded iterations of it; the iteration's child was "
            f"not run ({NOT_SENT})"
        )
    return recorded[number - 1].run


def _pinned_version(source: Run, step: WorkflowStep | LoopStep, recorded: Run) -> Workflow:
    """The child version approved with the replayed version (its pin), else the one the
    recorded child ran."""
    pin = (source.workflow.workflow_pins or {}).get(step.workflow)
    if pin and pin != recorded.definition_hash:
        pinned = (
            Workflow.objects.filter(name=step.workflow, definition_hash=pin)
            .order_by("-version")
            .first()
        )
        if pinned is not None:
            return pinned
    return recorded.workflow
