"""Errors of the workflow services and selectors, in a module both import at top."""

from __future__ import annotations

from tools.errors import FlowpilotError


class WorkflowError(FlowpilotError):
    code = "workflow_error"


class WorkflowTransitionError(WorkflowError):
    code = "workflow_transition_invalid"


class WorkflowNotFound(WorkflowError):
    code = "workflow_not_found"


class WorkflowNotActive(WorkflowNotFound):
    """The workflow exists, but the version asked for (or, without one, every version)
    is not active: it is named with its state (``pending_review``, ``draft``,
    ``archived``…), so a caller can tell "approve it first" from "no such workflow".
    A ``WorkflowNotFound`` still, for callers that only need "cannot run this"."""

    code = "workflow_not_active"

    def __init__(self, message: str, *, workflow: str, version: int, status: str) -> None:
        super().__init__(message)
        self.workflow = workflow
        self.version = version
        self.status = status
