"""workflows.validation.branches: decision branches and edge labels agree — a label that is
no branch, a default or condition for no branch, a branch with no edge, and the steps
behind labels that can never be chosen."""

from __future__ import annotations

from tools.registry import ToolRegistry
from workflows.validator import validate_workflow


def transform(step_id: str) -> dict:
    return {"id": step_id, "kind": "transform", "expression": "@", "input_mapping": {"x": 1}}


def decision(**fields) -> dict:
    return {
        "id": "hot",
        "kind": "decision",
        "branches": ["yes", "no"],
        "conditions": {"yes": "t > 25"},
        "default": "no",
        "input_mapping": {"t": 30},
        **fields,
    }


def issues(steps: list[dict], edges: list[dict]) -> list[tuple[str, str, str]]:
    report = validate_workflow(
        {"name": "b", "steps": steps, "edges": edges}, registry=ToolRegistry([])
    )
    return [(i.code, i.path, i.severity) for i in report.issues]


def test_matching_branches_and_labels_are_fine():
    edges = [{"from": "hot", "to": "a", "when": "yes"}, {"from": "hot", "to": "b", "when": "no"}]
    assert issues([decision(), transform("a"), transform("b")], edges) == []


def test_a_label_that_is_no_branch_is_an_error_with_a_suggestion_and_its_step_unreachable():
    edges = [{"from": "hot", "to": "a", "when": "yes"}, {"from": "hot", "to": "b", "when": "noo"}]
    report = validate_workflow(
        {"name": "b", "steps": [decision(), transform("a"), transform("b")], "edges": edges},
        registry=ToolRegistry([]),
    )
    found = {(i.code, i.path): i for i in report.issues}
    assert "(did you mean `no`?)" in found[("unknown_branch", "edges[1].when")].message
    assert found[("unreachable_step", "steps[2]")].severity == "warning"
    assert found[("branch_without_edge", "steps[0].branches[1]")].severity == "warning"


def test_a_label_on_an_edge_from_a_step_that_is_no_decision_is_an_error():
    edges = [{"from": "a", "to": "b", "when": "yes"}]
    assert ("when_on_non_decision", "edges[0].when", "error") in issues(
        [transform("a"), transform("b")], edges
    )


def test_a_default_or_condition_for_no_branch_is_an_error():
    step = decision(default="maybe", conditions={"yes": "t > 25", "perhaps": "t > 1"})
    edges = [{"from": "hot", "to": "a", "when": "yes"}, {"from": "hot", "to": "b", "when": "no"}]
    found = issues([step, transform("a"), transform("b")], edges)
    assert ("decision_default_unknown", "steps[0].default", "error") in found
    assert ("condition_unknown_branch", "steps[0].conditions.perhaps", "error") in found


def test_a_decision_without_any_labelled_edge_gets_no_warning_per_branch():
    found = issues([decision(), transform("a")], [{"from": "hot", "to": "a"}])
    assert not [f for f in found if f[0] == "branch_without_edge"]
