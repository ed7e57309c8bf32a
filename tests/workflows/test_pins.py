"""workflows.pins: what a version was approved with — the hashes of its tools and of the
active versions of the workflows it runs — and, before a run, each one that changed,
named with what changed."""

from __future__ import annotations

import pytest

from tests.factories import WorkflowFactory
from tests.tools.conftest import make_spec
from tools.registry import ToolRegistry
from workflows.models import Workflow, WorkflowStatus
from workflows.pins import (
    workflow_child_changes,
    workflow_child_pins,
    workflow_pins_check,
    workflow_tool_pins,
)
from workflows.schema import WorkflowSpec
from workflows.validation.report import WorkflowInvalid

pytestmark = pytest.mark.django_db


def child(expression: str = "a", status: str = WorkflowStatus.ACTIVE) -> Workflow:
    step = {"id": "s", "kind": "transform", "expression": expression, "input_mapping": {"a": 1}}
    return WorkflowFactory(data={"name": "child", "steps": [step]}, status=status)


def parent_spec() -> WorkflowSpec:
    return WorkflowSpec.model_validate(
        {
            "name": "parent",
            "steps": [
                {"id": "geo", "kind": "tool", "tool": "geo"},
                {"id": "run", "kind": "workflow", "workflow": "child"},
                {"id": "other", "kind": "workflow", "workflow": "nowhere"},
            ],
        }
    )


def test_approving_pins_every_allowed_tool_and_every_active_child():
    registry = ToolRegistry([make_spec(name="geo"), make_spec(name="unused")])
    version = child()
    assert list(workflow_tool_pins(spec=parent_spec(), registry=registry)) == ["geo"]
    assert workflow_child_pins(spec=parent_spec()) == {"child": version.definition_hash}


def test_a_child_with_another_active_version_is_named_with_what_changed():
    first = child("a")
    pins = {"child": first.definition_hash}
    first.status = WorkflowStatus.ARCHIVED
    first.save()
    child("b")
    assert workflow_child_changes(pins=pins) == [
        ("child", "v2 is active now (approved against v1); its steps changed")
    ]


def test_a_child_without_an_active_version_or_a_known_pin_is_named_too():
    version = child()
    assert workflow_child_changes(pins={"child": version.definition_hash}) == []
    assert workflow_child_changes(pins={"child": "0" * 64}) == [
        ("child", "v1 is active now; its definition changed")
    ]
    assert workflow_child_changes(pins={"gone": "0" * 64}) == [
        ("gone", "it has no active version any more")
    ]


def test_the_check_refuses_a_version_whose_tool_or_child_changed():
    version = child()
    parent = WorkflowFactory(data=parent_spec().to_data(), status=WorkflowStatus.ACTIVE)
    registry = ToolRegistry([make_spec("/a", name="geo")])
    parent.tool_pins = workflow_tool_pins(spec=parent_spec(), registry=registry)
    parent.workflow_pins = {"child": version.definition_hash}
    workflow_pins_check(workflow=parent, registry=registry)  # nothing changed

    parent.workflow_pins = {"child": "0" * 64}
    with pytest.raises(WorkflowInvalid) as caught:
        workflow_pins_check(workflow=parent, registry=ToolRegistry([make_spec("/b", name="geo")]))
    issues = caught.value.report.errors
    assert [(i.code, i.path) for i in issues] == [
        ("tool_changed", "tools"),
        ("workflow_changed", "steps"),
    ]
    assert "tool `geo` changed since `parent v1` was approved: its URL changed" in issues[0].message
