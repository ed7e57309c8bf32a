"""workflows.validation.schema_errors: pydantic's errors as ``schema_invalid`` issues at
JSON paths without the union's tag, each with what to write instead — for every kind of
the step union (a hand-written list of kinds once left `workflow` steps out)."""

from __future__ import annotations

import pytest

from tools.registry import ToolRegistry
from workflows.schema import step_kind_names
from workflows.validation.schema_errors import STEP_MODELS, clean_loc
from workflows.validator import validate_workflow


def found(*steps: dict, **data) -> dict[str, str]:
    report = validate_workflow(
        {"name": "w", "steps": list(steps), **data}, registry=ToolRegistry([])
    )
    return {i.path: i.message for i in report.issues if i.code == "schema_invalid"}


def test_every_kind_of_the_union_is_known():
    assert list(STEP_MODELS) == list(step_kind_names())
    message = found({"id": "s", "kind": "shell"})["steps[0]"]
    assert message.endswith(
        "unknown step kind `shell`; use one of "
        "`approval`, `decision`, `foreach`, `llm`, `loop`, `tool`, `transform`, `workflow`"
    )


@pytest.mark.parametrize("kind", step_kind_names())
def test_the_union_tag_is_dropped_from_the_path_of_every_kind(kind):
    assert clean_loc(("steps", 2, kind, "retry")) == ("steps", 2, "retry")
    assert clean_loc(("edges", 2, kind)) == ("edges", 2, kind)


@pytest.mark.django_db  # a workflow step's checks look its child up
def test_an_unknown_field_of_a_workflow_step_lists_its_own_fields():
    issues = found({"id": "s", "kind": "workflow", "workflow": "child", "wokflow": 1})
    assert "(did you mean `workflow`?)" in issues["steps[0].wokflow"]


def test_a_field_a_planner_means_is_named_by_its_alias():
    issues = found({"id": "s", "kind": "transform", "jmespath": "a"})
    assert "(did you mean `expression`?)" in issues["steps[0].jmespath"]
    assert (
        "steps do not list their parents"
        in found({"id": "s", "kind": "tool", "tool": "t", "depends_on": ["x"]})[
            "steps[0].depends_on"
        ]
    )


def test_a_missing_kind_is_guessed_from_the_fields_and_a_bad_id_slugged():
    assert "so it is likely `kind: transform`" in found({"id": "s", "expression": "a"})["steps[0]"]
    assert (
        "write `fetch_data`"
        in found({"id": "Fetch Data", "kind": "tool", "tool": "t"})["steps[0].id"]
    )
