"""The workflow errors: a version that is not active is named with its state, and is
still a ``WorkflowNotFound`` for callers that only need "cannot run this"."""

from __future__ import annotations

import pytest

from tests.factories import WorkflowFactory
from workflows.errors import WorkflowNotActive, WorkflowNotFound
from workflows.selectors import workflow_get_runnable

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("version", [1, None])
def test_a_version_pending_review_is_not_active_naming_its_state(version):
    WorkflowFactory(status="pending_review")

    with pytest.raises(WorkflowNotActive) as refused:
        workflow_get_runnable(name="sales_report", version=version)

    error = refused.value
    assert isinstance(error, WorkflowNotFound)
    assert (error.code, error.workflow, error.version, error.status) == (
        "workflow_not_active", "sales_report", 1, "pending_review"
    )  # fmt: skip
    assert "v1 is pending_review, not active" in error.message


def test_a_workflow_that_does_not_exist_is_not_found_not_inactive():
    with pytest.raises(WorkflowNotFound) as missing:
        workflow_get_runnable(name="nope")
    assert not isinstance(missing.value, WorkflowNotActive)
    assert missing.value.code == "workflow_not_found"
