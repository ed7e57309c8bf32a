"""Replaying a version offline against its validation run's recorded calls.

``version_replay`` is the workflow's regression test: a new run of ``version``
(trigger ``replay``, ``Run.replay_of`` = the validation run) with the validation
run's inputs, executed in this process with every HTTP exchange answered from the
recordings (``runs.replay.player``) — nothing is sent, so it works with the APIs
down — then compared step by step with the validation run (``runs.replay.report``).
Retries do not wait (the recorded answers are already there). Built-in tools run
as they always do (they are local); a version with ``llm`` steps, LLM decisions or
MCP tools is refused, because those calls do not go over a recorded HTTP transport.
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
from workflows.schema import WorkflowSpec
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
    _refuse_unrecordable(version, spec, registry)
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
    with context as ctx:
        if ctx.breakers is not None:  # no network: no host's breaker may refuse a call
            ctx.breakers.close()
            ctx.breakers = None
        run = run_execute(run=run, context=ctx)
    return replay_report(replay_run=run, source_run=source, unused=calls.unused())


def _refuse_unrecordable(version: Workflow, spec: WorkflowSpec, registry: ToolRegistry) -> None:
    steps = []
    for step in spec.steps:
        tools = {*step.direct_tools(), *step.model_tools()}
        mcp = sorted(n for n in tools if (t := registry.get(n)) is not None and t.kind == "mcp")
        if step.needs_llm():
            steps.append(f"`{step.id}` (calls the LLM)")
        elif mcp:
            steps.append(f"`{step.id}` (MCP tool {', '.join(mcp)})")
    if steps:
        raise ReplayRefused(
            f"`{version}` cannot be replayed offline: {', '.join(steps)} "
            f"{'does' if len(steps) == 1 else 'do'} not call over a recorded HTTP transport"
        )
