"""workflows.validation.partial: a definition that failed the schema is salvaged so the
cross checks still run — bad fields dropped, unreadable steps and edges turned into
placeholders whose own errors are not reported."""

from __future__ import annotations

from workflows.validation.partial import outside, salvage
from workflows.validation.report import error, warning


def step(step_id: str, **fields) -> dict:
    return {"id": step_id, "kind": "transform", "expression": "@", **fields}


def test_a_bad_field_of_a_step_is_dropped_and_the_step_kept():
    spec, placeholders = salvage({"name": "w", "steps": [step("a", timeout=-1), step("b")]})
    assert spec is not None
    assert [s.id for s in spec.steps] == ["a", "b"]
    assert spec.step("a").timeout is None
    assert placeholders == frozenset()


def test_an_unreadable_step_becomes_a_placeholder_keeping_its_id():
    spec, placeholders = salvage(
        {"name": "w", "steps": [{"id": "call", "kind": "shell"}, step("b")]}
    )
    assert spec is not None
    assert [s.id for s in spec.steps] == ["call", "b"]
    assert placeholders == frozenset({"steps[0]"})


def test_bad_inputs_name_and_workflow_fields_fall_back_to_defaults():
    data = {
        "name": "Not A Slug",
        "inputs": {"city": {"type": "place"}},
        "retention_days": -5,
        "steps": [step("a")],
    }
    spec, _ = salvage(data)
    assert spec is not None
    assert spec.name == "salvaged"
    assert spec.inputs["city"].type == "string"
    assert spec.retention_days is None


def test_what_cannot_be_salvaged_is_none():
    assert salvage(["not", "a", "mapping"]) == (None, frozenset())
    assert salvage({"name": "w", "steps": "many"}) == (None, frozenset())


def test_only_errors_outside_the_placeholders_are_kept():
    issues = [
        error("not_ancestor", "steps[0].input_mapping.x", "about the placeholder"),
        error("not_ancestor", "steps[01]", "another step, whose path only starts alike"),
        error("unknown_tool", "steps[1].tool", "elsewhere"),
        warning("unused_input", "inputs.x", "a warning"),
    ]
    kept = outside(issues, frozenset({"steps[0]"}))
    assert [i.message for i in kept] == ["another step, whose path only starts alike", "elsewhere"]
