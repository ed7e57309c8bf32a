"""workflows.validation.kinds: each kind's own static checks, registered for every kind of
the union — decisions that choose nothing, conditions and expressions that do not compile,
a foreach without its list, prompts reading what they do not map, bad schemas, endpoints."""

from __future__ import annotations

import pytest

from tools.registry import ToolRegistry
from workflows.schema import step_kind_names
from workflows.validation.kinds import KIND_CHECKS
from workflows.validator import validate_workflow


def codes_at(*steps: dict, edges: list | None = None) -> dict[str, set[str]]:
    """The error codes of a workflow of ``steps``, by path."""
    data = {"name": "k", "tools": ["t"], "steps": list(steps), "edges": edges or []}
    report = validate_workflow(data, registry=ToolRegistry([]))
    found: dict[str, set[str]] = {}
    for issue in report.errors:
        found.setdefault(issue.path, set()).add(issue.code)
    return found


def decision(**fields) -> dict:
    return {"id": "d", "kind": "decision", "branches": ["yes", "no"], **fields}


def test_every_kind_of_the_union_has_its_checks():
    assert list(KIND_CHECKS) == list(step_kind_names())


def test_a_decision_without_edges_or_conditions_chooses_nothing():
    found = codes_at(decision())
    assert found["steps[0]"] == {"decision_without_edges", "decision_without_conditions"}
    edges = [{"from": "d", "to": "a", "when": "yes"}]
    target = {"id": "a", "kind": "transform", "expression": "@"}
    assert codes_at(decision(), target, edges=edges)["steps[0]"] == {"decision_without_conditions"}


def test_a_condition_that_does_not_compile_is_located_by_branch_with_its_fix():
    edges = [{"from": "d", "to": "a", "when": "yes"}]
    target = {"id": "a", "kind": "transform", "expression": "@"}
    data = {
        "name": "k",
        "steps": [
            decision(conditions={"yes": "$input.t > 3"}, input_mapping={"t": "$input.t"}),
            target,
        ],
        "edges": edges,
        "inputs": {"t": {"type": "number"}},
    }
    report = validate_workflow(data, registry=ToolRegistry([]))
    issue = next(i for i in report.errors if i.code == "condition_invalid")
    assert issue.path == "steps[0].conditions.yes"
    assert "write `t` for `$input.t`" in issue.message


def test_a_transform_that_does_not_compile_says_how_to_fix_it():
    found = codes_at({"id": "s", "kind": "transform", "expression": "{a: b[0"})
    assert found["steps[0].expression"] == {"transform_invalid"}


def test_a_foreach_must_map_its_items():
    step = {"id": "each", "kind": "foreach", "tool": "t", "item_mapping": {"items": "$item"}}
    report = validate_workflow({"name": "k", "steps": [step]}, registry=ToolRegistry([]))
    issue = next(i for i in report.errors if i.code == "foreach_without_items")
    assert issue.path == "steps[0].input_mapping"
    assert "(it is in `item_mapping`" in issue.message


@pytest.mark.parametrize(
    ("prompt", "code"),
    [("Summarize {{text}}", "prompt_invalid"), ("Key: {{env.SECRET}}", "env_in_prompt")],
)
def test_a_prompt_reads_only_its_mapped_names(prompt, code):
    step = {"id": "s", "kind": "llm", "prompt": prompt, "input_mapping": {"body": "x"}}
    assert codes_at(step)["steps[0].prompt"] == {code}


def test_an_output_schema_must_be_a_json_schema_and_an_endpoint_configured(settings):
    settings.FLOWPILOT_LLM_ENDPOINTS = {"local": {"base_url": "http://127.0.0.1:9/v1"}}
    step = {"id": "s", "kind": "llm", "prompt": "p", "output_schema": {"type": "list"}}
    assert codes_at(step)["steps[0].output_schema"] == {"output_schema_invalid"}
    found = codes_at({"id": "s", "kind": "llm", "prompt": "p", "endpoint": "locl"})
    assert found["steps[0].endpoint"] == {"endpoint_unknown"}
    assert "steps[0].endpoint" not in codes_at(
        {"id": "s", "kind": "llm", "prompt": "p", "endpoint": "local"}
    )
