"""Creating a run: the version validated, its inputs checked, the run and its steps recorded.

``run_create`` (re-exported by ``runs.services``) is here, below the engine, because a
`workflow` step creates its child run from inside the engine (``runs.engine.kinds.workflow``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from runs.engine.secrets import inputs_refuse_secrets, run_redactor
from runs.models import Run, StepResult
from runs.state import RunTrigger
from tools.registry import ToolRegistry
from workflows.inputs import resolve_inputs
from workflows.models import Workflow
from workflows.pins import workflow_pins_check
from workflows.services import workflow_spec
from workflows.validator import validate_workflow

logger = logging.getLogger("flowpilot.runs")


def run_create(
    *,
    workflow: Workflow,
    trigger: str,
    inputs: Mapping[str, Any] | None = None,
    registry: ToolRegistry | None = None,
    parent_step: StepResult | None = None,
) -> Run:
    """Validate the version and the inputs, then record a pending run and its steps.

    Raises ``WorkflowInvalid`` (with every problem; ``tool_changed`` when a tool of
    an approved version changed since approval, ``workflow_changed`` when a workflow
    it runs as a step did — a validation run, which proves the version on the new
    definitions, is not refused) or ``InputsInvalid`` (also for an input holding a
    secret value: stored inputs are read back by the run, so they are never masked,
    and a secret is refused rather than stored). ``parent_step`` makes it the child
    run of that `workflow` step.
    """
    spec = workflow_spec(workflow)
    registry = registry if registry is not None else ToolRegistry.from_db()
    validate_workflow(spec, registry=registry).raise_for_errors()
    if trigger != RunTrigger.VALIDATION:
        workflow_pins_check(workflow=workflow, registry=registry)
    resolved = resolve_inputs(spec.inputs, dict(inputs or {}))
    inputs_refuse_secrets(inputs=resolved, redactor=run_redactor(registry, os.environ))
    with transaction.atomic():
        run = Run.objects.create(
            workflow=workflow,
            definition_hash=workflow.definition_hash,
            trigger=trigger,
            inputs=resolved,
            parent_run_id=parent_step.run_id if parent_step is not None else None,
            parent_step=parent_step,
        )
        StepResult.objects.bulk_create(StepResult(run=run, step_id=s.id) for s in spec.steps)
    logger.info("run %s created for %s (%s)", run.pk, workflow, trigger)
    return run
