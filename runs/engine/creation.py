"""Creating the child run of a `workflow` step, from inside the engine.

``runs.services.run_create`` sits above the engine (it imports the drivers), so the
step kind (``runs.engine.kinds.workflow``) cannot call it; ``child_run_create`` makes
the same checks for a child run — the version validated against the registry, its
own pins (tools and child workflows changed since approval), the inputs checked and
free of secret values — and links the run to its parent step. It lives in the
engine, beside the step kind that calls it, so the engine imports nothing of
``runs`` above it; a replay (``runs.replay``) creates its child runs with it too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from runs.engine.rows import run_rows_create
from runs.engine.secrets import inputs_refuse_secrets
from runs.models import Run, StepResult
from runs.state import RunTrigger
from tools.registry import ToolRegistry
from workflows.inputs import resolve_inputs
from workflows.models import Workflow
from workflows.pins import workflow_pins_check
from workflows.services import workflow_spec
from workflows.validator import validate_workflow

logger = logging.getLogger("flowpilot.runs")


def child_run_create(
    *,
    workflow: Workflow,
    inputs: Mapping[str, Any],
    registry: ToolRegistry,
    parent_step: StepResult,
    replay_of: Run | None = None,
) -> Run:
    """Record a pending child run of ``workflow`` for the `workflow` step ``parent_step``.

    With ``replay_of`` (a validation run's child run), the child of a replay: trigger
    ``replay``, linked to the run whose recorded calls answer it, not refused for pins
    (as ``run_create`` does not refuse a replay).

    Raises ``WorkflowInvalid`` or ``InputsInvalid`` as ``run_create`` does; the step
    fails with that error.
    """
    spec = workflow_spec(workflow)
    validate_workflow(spec, registry=registry).raise_for_errors()
    if replay_of is None:
        workflow_pins_check(workflow=workflow, registry=registry)
    resolved = resolve_inputs(spec.inputs, dict(inputs))
    inputs_refuse_secrets(inputs=resolved, registry=registry, env=os.environ)
    run = Run(
        workflow=workflow,
        definition_hash=workflow.definition_hash,
        trigger=RunTrigger.WORKFLOW if replay_of is None else RunTrigger.REPLAY,
        inputs=resolved,
        replay_of=replay_of,
        parent_run_id=parent_step.run_id,
        parent_step=parent_step,
    )
    run_rows_create(run, [StepResult(run=run, step_id=s.id) for s in spec.steps])
    logger.info(
        "run %s created for %s (step %s)", run.pk, workflow, parent_step.step_id,
        extra={"run_id": run.pk},
    )  # fmt: skip
    return run
