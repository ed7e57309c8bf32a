"""workflows.versions: a definition sent by a client is checked against the tool registry
before anything is stored; every problem is reported at once, with its path."""

from __future__ import annotations

import pytest

from tools.registry import ToolRegistry
from workflows.models import Workflow, WorkflowStatus
from workflows.services import WorkflowError
from workflows.validation.report import WorkflowInvalid
from workflows.versions import workflow_check, workflow_create_version

pytestmark = pytest.mark.django_db

NO_TOOLS = ToolRegistry([])


def shaped(**changes) -> dict:
    step = {"id": "pick", "kind": "transform", "expression": "a", "input_mapping": {"a": 1}}
    return {"name": "shape", "steps": [step], **changes}


def test_a_valid_definition_becomes_the_next_version_and_an_unchanged_one_does_not():
    first, created = workflow_create_version(data=shaped(), owner=None, registry=NO_TOOLS)
    assert created
    assert (first.version, first.status) == (1, WorkflowStatus.DRAFT)
    again, created = workflow_create_version(data=shaped(), owner=None, registry=NO_TOOLS)
    assert (again.pk, created) == (first.pk, False)
    second, created = workflow_create_version(
        data=shaped(description="v2"), owner=None, registry=NO_TOOLS,
        status=WorkflowStatus.PENDING_REVIEW,
    )  # fmt: skip
    assert (second.version, second.status, created) == (2, WorkflowStatus.PENDING_REVIEW, True)


def test_every_problem_is_reported_and_nothing_is_stored():
    data = shaped(steps=[{"id": "call", "kind": "tool", "tool": "nowhere"}], outputs={"x": "y.z"})
    with pytest.raises(WorkflowInvalid) as caught:
        workflow_create_version(data=data, owner=None, registry=NO_TOOLS)
    codes = {issue.code for issue in caught.value.report.errors}
    assert len(codes) >= 2
    assert "unknown_tool" in codes
    assert not Workflow.objects.exists()


def test_a_version_cannot_start_active():
    with pytest.raises(WorkflowError, match="starts as draft or pending_review, not active"):
        workflow_create_version(
            data=shaped(), owner=None, registry=NO_TOOLS, status=WorkflowStatus.ACTIVE
        )


def test_a_check_stores_nothing_and_reports_oversized_data_as_one_issue():
    assert workflow_check(data=shaped(), registry=NO_TOOLS).ok
    deep: list = []
    for _ in range(200):
        deep = [deep]
    report = workflow_check(data=shaped(description=deep), registry=NO_TOOLS)
    assert [(i.code, i.path) for i in report.issues] == [("data_too_large", "")]
    assert not Workflow.objects.exists()
