"""workflows.validation.tool_checks: every tool a step names is registered and allowed,
deprecated ones are warned about, required parameters are mapped, unknown ones named
with what the tool takes, and look-alike letters in the allowlist spelt out."""

from __future__ import annotations

from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.validator import validate_workflow


def tool(name: str, **fields) -> ToolSpec:
    return ToolSpec.model_validate(
        {
            "name": name,
            "http": {"base_url": "https://api.test", "request": {"url": "/"}},
            "input_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                "required": ["city"],
            },
            **fields,
        }
    )


REGISTRY = ToolRegistry([tool("geocode"), tool("old_geo", deprecated=True, replacement="geocode")])


def found(steps: list[dict], **data) -> dict[tuple[str, str], str]:
    report = validate_workflow({"name": "t", "steps": steps, **data}, registry=REGISTRY)
    return {(i.code, i.path): i.message for i in report.issues}


def call(name: str = "geocode", **mapping) -> dict:
    return {"id": "g", "kind": "tool", "tool": name, "input_mapping": mapping or {"city": "Oslo"}}


def test_a_registered_allowed_tool_with_its_parameters_is_fine():
    assert found([call()]) == {}


def test_an_unknown_tool_is_named_with_a_suggestion_and_the_registered_ones():
    message = found([call("geocod")])[("unknown_tool", "steps[0].tool")]
    assert "(did you mean `geocode`?)" in message
    assert "the registered tools are `geocode`, `old_geo`" in message


def test_a_tool_outside_the_allowlist_is_refused():
    assert ("tool_not_allowed", "steps[0].tool") in found([call()], tools=["old_geo"])


def test_a_deprecated_tool_is_a_warning_naming_its_replacement():
    message = found([call("old_geo")])[("tool_deprecated", "steps[0].tool")]
    assert message.endswith("which is deprecated; use `geocode` instead")


def test_parameters_required_and_unknown():
    issues = found([call(cty="Oslo")])
    assert ("missing_required_param", "steps[0].input_mapping") in issues
    message = issues[("unknown_param", "steps[0].input_mapping.cty")]
    assert "(did you mean `city`?); it takes `city`, `country`" in message


def test_a_look_alike_in_the_allowlist_is_spelt_out():
    issues = found([call()], tools=["geocode", "g\u0435ocode"])
    assert "write `geocode` in ASCII" in issues[("confusable_character", "tools[1]")]
