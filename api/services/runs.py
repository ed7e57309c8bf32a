"""Starting a run by name, and restarting one from a step, over the API: once per
Idempotency-Key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runs.idempotency import restart_fingerprint, run_create_idempotent, run_once
from runs.models import Run, RunTrigger
from runs.restart import restart_version, run_restart_prepare
from workflows.selectors import workflow_get_runnable

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def run_start(
    *,
    workflow_name: str,
    version: int | None,
    inputs: Mapping[str, Any] | None,
    user: User,
    idempotency_key: str | None,
    trigger: str = RunTrigger.API,
) -> tuple[Run, bool]:
    """The active version of ``workflow_name`` (or the given active ``version``), run with
    ``inputs``; returns ``(run, created)`` — ``created`` is false when the key was used
    before for the same request. ``WorkflowNotFound`` / ``InputsInvalid`` /
    ``IdempotencyKeyReused`` otherwise. ``trigger``: ``api``, or ``mcp`` for a run an
    agent starts through flowpilot's MCP server."""
    workflow = workflow_get_runnable(name=workflow_name, version=version)
    return run_create_idempotent(
        workflow=workflow,
        trigger=trigger,
        inputs=inputs,
        user=user,
        key=idempotency_key,
    )


def run_restart_start(
    *,
    run: Run,
    from_step: str | None,
    confirm: bool,
    user: User,
    idempotency_key: str | None,
    version: int | None = None,
) -> tuple[Run, bool]:
    """``run`` restarted from ``from_step`` (None: from the trigger), onto version number
    ``version`` of its workflow (None: its own), as a new run, enqueued
    like a started one; returns ``(run, created)`` as ``run_start`` does — the same key
    for the same run and step answers the run it created. Refused as
    ``run_restart_prepare`` refuses (``RestartNeedsConfirmation`` without ``confirm`` when
    a re-run step is not idempotent, ``RestartRefused``, ``RunStateError``…)."""
    return run_once(
        user=user,
        key=idempotency_key,
        fingerprint=restart_fingerprint(run=run, from_step=from_step, version=version),
        create=lambda: run_restart_prepare(
            run=run,
            from_step=from_step,
            confirm_non_idempotent=confirm,
            trigger=RunTrigger.API,
            actor=user,
            version=None if version is None else restart_version(run, version),
        ),
    )
