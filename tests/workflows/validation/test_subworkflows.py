"""The checks of `workflow` steps without a database: a lookup passed in."""

from __future__ import annotations

from workflows.schema import WorkflowSpec
from workflows.validator import validate_workflow


def spec(data: dict) -> WorkflowSpec:
    return WorkflowSpec.model_validate(data)


def transform(step_id: str, **mapping) -> dict:
    return {"id": step_id, "kind": "transform", "expression": "@", "input_mapping": mapping}


def calls(step_id: str, child: str) -> dict:
    return {"id": step_id, "kind": "workflow", "workflow": child}


SINKS = spec({"name": "sinks", "steps": [transform("a", x=1), transform("b", y="a.z")]})
LEAF = spec({"name": "leaf", "steps": [transform("only", x=1)]})
FAN = spec({"name": "fan", "steps": [calls("one", "leaf"), calls("two", "leaf")]})
CYCLIC = spec({"name": "cyclic", "steps": [transform("p", x="q.v"), transform("q", y="p.v")]})
LOOKUP = {"sinks": SINKS, "leaf": LEAF, "fan": FAN, "cyclic": CYCLIC}


def codes(data: dict, **kwargs) -> list[tuple[str, str]]:
    report = validate_workflow(data, **{"registry": {}, "workflows": LOOKUP, **kwargs})
    return [(i.code, i.path) for i in report.issues]


def parent(child: str, *reads: str) -> dict:
    return {
        "name": "parent",
        "steps": [calls("sub", child), *(transform(f"r{i}", v=r) for i, r in enumerate(reads))],
    }


def test_a_child_without_declared_outputs_outputs_its_sink_steps():
    assert codes(parent("sinks", "sub.b")) == []
    assert codes(parent("sinks", "sub.a")) == [("unknown_output_field", "steps[1].input_mapping.v")]


def test_a_child_whose_graph_cannot_be_built_allows_any_field():
    assert codes(parent("cyclic", "sub.anything")) == []


def test_a_child_calling_one_workflow_twice_is_no_recursion():
    assert codes(parent("fan")) == []


def test_schema_only_validation_skips_the_workflow_checks():
    assert codes(parent("nobody"), registry=None, workflows=None) == []
