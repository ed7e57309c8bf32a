"""Starting a run by name over the API, once per Idempotency-Key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs.idempotency import run_create_idempotent
from runs.models import Run, RunTrigger
from workflows.selectors import workflow_get_runnable


def run_start(
    *,
    workflow_name: str,
    version: int | None,
    inputs: Mapping[str, Any] | None,
    user,
    idempotency_key: str | None,
) -> tuple[Run, bool]:
    """The active version of ``workflow_name`` (or the given active ``version``), run with
    ``inputs``; returns ``(run, created)`` — ``created`` is false when the key was used
    before for the same request. ``WorkflowNotFound`` / ``InputsInvalid`` /
    ``IdempotencyKeyReused`` otherwise."""
    workflow = workflow_get_runnable(name=workflow_name, version=version)
    return run_create_idempotent(
        workflow=workflow,
        trigger=RunTrigger.API,
        inputs=inputs,
        user=user,
        key=idempotency_key,
    )
