"""Errors of the workflow services and selectors, in a module both import at top."""

from __future__ import annotations

from tools.errors import FlowpilotError


class WorkflowError(FlowpilotError):
    code = "workflow_error"


class WorkflowTransitionError(WorkflowError):
    code = "workflow_transition_invalid"


class WorkflowNotFound(WorkflowError):
    code = "workflow_not_found"
