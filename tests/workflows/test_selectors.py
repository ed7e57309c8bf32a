"""workflows.selectors: which version a trigger runs (and why none, in words), which
version a revision is reviewed against, and the data of a version's graph picture."""

from __future__ import annotations

import pytest

from tests.factories import WorkflowFactory
from workflows.errors import WorkflowNotFound
from workflows.models import WorkflowStatus
from workflows.selectors import workflow_diff_base, workflow_get_runnable, workflow_graph_data

pytestmark = pytest.mark.django_db


def version(expression: str, status: str = WorkflowStatus.DRAFT):
    steps = [
        {"id": "read", "kind": "transform", "expression": expression, "input_mapping": {"a": 1}},
        {"id": "pick", "kind": "decision", "branches": ["yes", "no"], "default": "no",
         "input_mapping": {"v": "$step.read"}},
        {"id": "done", "kind": "transform", "name": "Done", "expression": "@",
         "input_mapping": {"x": 1}},
    ]  # fmt: skip
    edges = [{"from": "pick", "to": "done", "when": "yes"}]
    return WorkflowFactory(data={"name": "w", "steps": steps, "edges": edges}, status=status)


def test_the_newest_active_version_runs_by_name_or_the_one_asked_for():
    v1 = version("a", WorkflowStatus.ACTIVE)
    version("b", WorkflowStatus.PENDING_REVIEW)
    assert workflow_get_runnable(name="w") == v1
    assert workflow_get_runnable(name="w", version=1) == v1


@pytest.mark.parametrize(
    ("name", "number", "message"),
    [
        ("nope", None, "no stored workflow named `nope`"),
        ("w", 7, "workflow `w` has no v7 (has v2, v1)"),
        ("w", 2, "workflow `w` v2 is pending_review, not active"),
        ("w", None, "has no active version (newest is v2, pending_review)"),
    ],
)
def test_what_cannot_run_says_what_exists_instead(name, number, message):
    version("a", WorkflowStatus.ARCHIVED)
    version("b", WorkflowStatus.PENDING_REVIEW)
    with pytest.raises(WorkflowNotFound) as caught:
        workflow_get_runnable(name=name, version=number)
    assert message in caught.value.message


def test_a_revision_is_reviewed_against_the_active_version_else_the_one_before():
    first = version("a", WorkflowStatus.ACTIVE)
    second = version("b", WorkflowStatus.REJECTED)
    third = version("c", WorkflowStatus.PENDING_REVIEW)
    assert workflow_diff_base(version=third) == first
    assert workflow_diff_base(version=first) is None
    first.status = WorkflowStatus.ARCHIVED
    first.save()
    assert workflow_diff_base(version=third) == second


def test_the_graph_data_has_the_steps_in_file_order_and_every_edge():
    data = workflow_graph_data(version("a"))
    assert (data["name"], data["version"]) == ("w", 1)
    assert [(n["id"], n["kind"]) for n in data["nodes"]] == [
        ("read", "transform"), ("pick", "decision"), ("done", "transform"),
    ]  # fmt: skip
    assert data["nodes"][1]["branches"] == ["yes", "no"]
    assert data["nodes"][2]["name"] == "Done"
    assert {"from": "pick", "to": "done", "when": "yes", "inferred": False} in data["edges"]
    assert {"from": "read", "to": "pick", "when": "", "inferred": True} in data["edges"]


def test_a_loop_node_carries_its_workflow_bound_and_condition():
    steps = [
        {"id": "review", "kind": "loop", "workflow": "fixup", "max_iterations": 4,
         "until": "output.passed == true", "input_mapping": {"draft": "x"}},
        {"id": "done", "kind": "transform", "expression": "@",
         "input_mapping": {"t": "review.last"}},
    ]  # fmt: skip
    data = workflow_graph_data(WorkflowFactory(data={"name": "w", "steps": steps}))
    loop, done = data["nodes"]
    assert (loop["kind"], loop["loop"]) == (
        "loop",
        {"workflow": "fixup", "max_iterations": 4, "until": "output.passed == true"},
    )
    assert "loop" not in done
