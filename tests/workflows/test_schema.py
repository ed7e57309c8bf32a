"""workflows.schema: the one list of step kinds, the discriminated union, a spec's
allowlists, its file form and the hash a version freezes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workflows.schema import InputSpec, WorkflowSpec, step_kind_names, step_models


def spec(**changes) -> WorkflowSpec:
    data = {
        "name": "weather",
        "inputs": {"city": {"type": "string"}},
        "steps": [
            {"id": "geo", "kind": "tool", "tool": "geocode", "input_mapping": {"q": "$input.city"}},
            {"id": "ask", "kind": "llm", "prompt": "p", "tools": ["search"]},
        ],
        **changes,
    }
    return WorkflowSpec.model_validate(data)


def test_the_kinds_are_the_union_in_its_order():
    assert step_kind_names() == (
        "tool",
        "llm",
        "decision",
        "transform",
        "foreach",
        "workflow",
        "loop",
        "approval",
    )
    assert [m.__name__ for m in step_models()][:2] == ["ToolStep", "LLMStep"]


def test_a_step_is_parsed_by_its_kind_and_an_unknown_kind_is_located():
    assert type(spec().step("ask")).__name__ == "LLMStep"
    with pytest.raises(ValidationError) as caught:
        spec(steps=[{"id": "x", "kind": "shell"}])
    assert caught.value.errors()[0]["loc"] == ("steps", 0)
    assert caught.value.errors()[0]["type"] == "union_tag_invalid"


def test_the_allowlist_adds_the_tools_a_step_lets_a_model_call():
    assert spec().allowed_tools() == ["geocode"]
    assert spec().allowlist() == frozenset({"geocode", "search"})
    assert spec(tools=["geocode"]).allowlist() == frozenset({"geocode"})


def test_the_file_form_keeps_only_what_was_written_with_aliases():
    data = spec(edges=[{"from": "geo", "to": "ask"}]).to_data()
    assert data["edges"] == [{"from": "geo", "to": "ask"}]
    assert "retry" not in data["steps"][0]
    assert list(data) == ["name", "inputs", "steps", "edges"]


def test_the_hash_does_not_depend_on_key_order_and_changes_with_content():
    one = spec()
    reordered = WorkflowSpec.model_validate(dict(reversed(list(one.to_data().items()))))
    assert reordered.definition_hash() == one.definition_hash()
    assert spec(description="other").definition_hash() != one.definition_hash()
    assert len(one.definition_hash()) == 64


def test_step_lookup_is_by_id():
    with pytest.raises(KeyError):
        spec().step("missing")


def test_an_input_is_required_unless_it_has_a_default_or_says_otherwise():
    assert InputSpec().is_required
    assert not InputSpec(default="Oslo").is_required
    assert InputSpec(default="Oslo", required=True).is_required
    with pytest.raises(ValidationError, match="input name '1city'"):
        spec(inputs={"1city": {}})
