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

Refused: a version with ``workflow`` steps (their child runs' calls are not recorded
with the validation run, and running a child would reach its tools for real).
"""

from __future__ import annotations

from typing import Any

from runs.engine.context import build_run_context
from runs.models import Run
from runs.replay.player import RecordedCalls
from runs.replay.report import ReplayReport, replay_report
from runs.services import OPERATE_PERMISSION, run_create, run_execute
from runs.state import RunError, RunStatus, RunTrigger
from tools.permissions import permission_require
from tools.registry import ToolRegistry
from workflows.models import Workflow
from workflows.schema import WorkflowSpec, WorkflowStep
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
    spec = workflow_spec(version)
    registry = ToolRegistry.from_db()
    _refuse_unrecordable(version, spec)
    run = run_create(
        workflow=version,
        trigger=RunTrigger.REPLAY,
        inputs=source.inputs,
        registry=registry,
        replay_of=source,
    )
    calls = RecordedCalls.of(source)
    context = build_run_context(
        run_id=run.pk,
        run_uuid=str(run.uuid),
        spec=spec,
        registry=registry,
        taps=calls,
        sleep=lambda seconds: None,
    )
    context.run_child = _no_child_run  # refused above; never run a child for real
    with context as ctx:
        if ctx.breakers is not None:  # no network: no host's breaker may refuse a call
            ctx.breakers.close()
            ctx.breakers = None
        run = run_execute(run=run, context=ctx)
    return replay_report(replay_run=run, source_run=source, unused=calls.unused())


def _refuse_unrecordable(version: Workflow | str, spec: WorkflowSpec) -> None:
    """Refuse what cannot be replayed offline: a `workflow` step runs a child run,
    whose calls were made (and would be made again) outside the recorded run."""
    steps = [f"`{s.id}` (runs `{s.workflow}`)" for s in spec.steps if isinstance(s, WorkflowStep)]
    if steps:
        raise ReplayRefused(
            f"`{version}` cannot be replayed offline: {', '.join(steps)} "
            f"{'is a `workflow` step' if len(steps) == 1 else 'are `workflow` steps'}, whose "
            "child runs' calls are not recorded with the validation run"
        )


def _no_child_run(child: Run) -> Run:
    raise ReplayRefused(f"a replay does not start child runs (run {child.pk} was not started)")
