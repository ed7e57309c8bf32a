"""Storing a definition sent by a client as a new version, checked first.

``workflow_import`` stores whatever parses (a file an operator runs is validated at
run time); a definition that arrives over the API is checked against the tool
registry before anything is stored, so the caller hears about every problem at
once, each with its JSON path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tools.data_limits import data_limit_problem
from tools.registry import ToolRegistry
from workflows.models import Workflow, WorkflowStatus
from workflows.services import WorkflowError, workflow_import
from workflows.validation.report import ValidationIssue, ValidationReport
from workflows.validator import validate_workflow

if TYPE_CHECKING:
    from django.contrib.auth.models import User


# A new version starts as a draft or goes straight to review.
CREATABLE_STATUSES = (WorkflowStatus.DRAFT, WorkflowStatus.PENDING_REVIEW)


def workflow_check(
    *, data: Mapping[str, Any], registry: ToolRegistry | None = None
) -> ValidationReport:
    """Every problem of ``data`` against the tool registry; stores nothing, never raises.

    Data past the size and nesting limits is one ``data_too_large`` issue.
    """
    problem = data_limit_problem(dict(data))
    if problem:
        return ValidationReport((ValidationIssue("data_too_large", "", problem),))
    return validate_workflow(
        dict(data), registry=registry if registry is not None else ToolRegistry.from_db()
    )


def workflow_create_version(
    *,
    data: Mapping[str, Any],
    owner: User | None,
    status: str = WorkflowStatus.DRAFT,
    registry: ToolRegistry | None = None,
) -> tuple[Workflow, bool]:
    """Validate ``data``, then store it as the next version of its name.

    Raises ``WorkflowInvalid`` (every issue, with its path) and stores nothing when
    the definition has errors. Returns ``(version, created)``: an unchanged
    definition returns the newest version as it is (``created`` false).
    """
    if status not in CREATABLE_STATUSES:
        raise WorkflowError(f"a new version starts as draft or pending_review, not {status}")
    report = workflow_check(data=data, registry=registry)
    return workflow_import(data=report.valid_spec(), owner=owner, status=status)
