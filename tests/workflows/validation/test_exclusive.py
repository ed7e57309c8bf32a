"""workflows.validation.exclusive: a step that runs only on one branch of a decision and
reads a step that runs only on another always reads null — an error naming both branches;
reading a step before the decision, or one on a shared branch, is fine."""

from __future__ import annotations

from tools.registry import ToolRegistry
from workflows.validator import validate_workflow


def transform(step_id: str, **mapping) -> dict:
    return {
        "id": step_id,
        "kind": "transform",
        "expression": "@",
        "input_mapping": mapping or {"x": 1},
    }


DECISION = {
    "id": "size",
    "kind": "decision",
    "branches": ["big", "small", "none"],
    "conditions": {"big": "n > 10", "small": "n > 0"},
    "default": "none",
    "input_mapping": {"n": "count.x"},
}
EDGES = [
    {"from": "size", "to": "archive", "when": "big"},
    {"from": "size", "to": "note", "when": "small"},
    {"from": "size", "to": "note", "when": "none"},
]


def errors(reader_mapping: dict) -> list:
    steps = [
        transform("count"),
        DECISION,
        transform("archive"),
        transform("note", **reader_mapping),
    ]
    report = validate_workflow(
        {"name": "e", "steps": steps, "edges": EDGES}, registry=ToolRegistry([])
    )
    return [i for i in report.errors if i.code == "exclusive_branch_read"]


def test_a_read_across_exclusive_branches_is_an_error_naming_both():
    found = errors({"v": "archive.x"})
    assert [i.path for i in found] == ["steps[3].input_mapping.v"]
    assert found[0].message.startswith(
        "step `note` runs only on branches `none`, `small` of decision `size` and reads "
        "`archive.x`, but `archive` runs only on branch `big`, so it never ran"
    )


def test_a_read_of_a_step_before_the_decision_is_fine():
    assert errors({"v": "count.x"}) == []


def test_without_labelled_edges_nothing_is_exclusive():
    steps = [transform("a"), transform("b", v="a.x")]
    report = validate_workflow({"name": "e", "steps": steps}, registry=ToolRegistry([]))
    assert not [i for i in report.errors if i.code == "exclusive_branch_read"]
