"""Every step kind of the schema's union is fully registered: its engine module, its
validation, and the facts the engine asks it. A half-registered kind fails here."""

from __future__ import annotations

import typing

import pytest

from runs.engine.kinds import KINDS
from workflows.schema import AnyStep, ForeachStep, WorkflowSpec
from workflows.validation.kinds import KIND_CHECKS

MODELS = typing.get_args(AnyStep)
KIND_NAMES = sorted(m.model_fields["kind"].default for m in MODELS)

EXAMPLES = {
    "tool": {"tool": "t"},
    "llm": {"prompt": "p", "tools": ["helper"]},
    "decision": {"branches": ["yes"], "conditions": {"yes": "true"}},
    "transform": {"expression": "a"},
    "foreach": {"tool": "t", "input_mapping": {"items": [1]}, "timeout": 5},
    "workflow": {"workflow": "child", "input_mapping": {"x": 1}, "timeout": 5},
}


def example(kind: str):
    data = {"id": "s", "kind": kind, **EXAMPLES[kind]}
    return WorkflowSpec.model_validate({"name": "k", "steps": [data]}).steps[0]


def test_every_kind_of_the_union_has_an_engine_module_and_validation():
    assert sorted(KINDS) == KIND_NAMES
    assert sorted(KIND_CHECKS) == KIND_NAMES
    assert sorted(EXAMPLES) == KIND_NAMES  # a new kind needs an example here too
    for name, kind in KINDS.items():
        assert kind.model.model_fields["kind"].default == name
        assert callable(kind.execute)


@pytest.mark.parametrize("name", KIND_NAMES)
def test_every_kind_answers_the_engines_questions(name):
    step = example(name)
    kind = KINDS[name]

    assert isinstance(step, kind.model)
    assert isinstance(step.needs_llm(), bool)
    assert isinstance(step.retries_per_item, bool)
    assert isinstance(step.picks_branch, bool)
    assert all(isinstance(t, str) for t in step.direct_tools() + step.model_tools())
    assert "input_mapping" in step.mappings()
    assert isinstance(dict(kind.compile(step)), dict)
    assert step.branch_of({"branch": "yes"}) == ("yes" if step.picks_branch else None)


def test_the_facts_of_each_kind():
    tool, llm, decision, transform, foreach, workflow = (example(k) for k in EXAMPLES)

    assert [s.needs_llm() for s in (tool, llm, decision, transform, foreach, workflow)] == [
        False, True, False, False, False, False,
    ]  # fmt: skip
    assert example("decision").model_copy(update={"decision_prompt": "which?"}).needs_llm()
    assert foreach.retries_per_item
    assert not tool.retries_per_item
    assert foreach.step_time_limit() is None
    assert foreach.timeout == 5
    assert tool.direct_tools() == foreach.direct_tools() == ("t",)
    assert llm.model_tools() == ("helper",)
    assert llm.direct_tools() == ()
    assert tool.output_tool() == "t"
    assert foreach.output_tool() is None
    assert sorted(foreach.mappings()) == ["input_mapping", "item_mapping"]
    assert set(KINDS["decision"].compile(decision)) == {"yes"}
    assert set(KINDS["transform"].compile(transform)) == {"expression"}
    assert isinstance(foreach, ForeachStep)
    # a workflow step runs a child run: no tools of its own, no time limit of one try
    assert workflow.called_workflow() == "child"
    assert tool.called_workflow() is None
    assert workflow.direct_tools() == workflow.model_tools() == ()
    assert workflow.step_time_limit() is None
    assert workflow.output_tool() is None
