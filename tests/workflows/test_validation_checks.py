"""Checks beyond the planner-mistakes corpus: whole-output references and look-alikes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workflows.test_validator import REGISTRY
from workflows.graph import build_graph
from workflows.references import ReferenceError_, StepRef, parse_value
from workflows.schema import WorkflowSpec
from workflows.validation.confusables import describe, skeleton
from workflows.validator import ISSUE_CODES, validate_workflow

CYRILLIC_E = "\u0435"


def _flow(*steps, outputs=None) -> dict:
    flow = {"name": "f", "inputs": {"city": {"type": "string"}}, "steps": list(steps)}
    if outputs is not None:
        flow["outputs"] = outputs
    return flow


GEO = {"id": "geo", "kind": "tool", "tool": "geocode", "input_mapping": {"city": "$input.city"}}


def _page(**mapping) -> dict:
    return {
        "id": "page",
        "kind": "tool",
        "tool": "fetch",
        "input_mapping": {"url": "https://example.com", **mapping},
    }


def test_whole_output_reference_parses_and_infers_an_edge():
    assert parse_value("$step.geo", {"geo"}) == StepRef("geo")
    assert parse_value("$step.geo.lat", {"geo"}) == StepRef("geo", ("lat",))
    assert str(StepRef("geo")) == "$step.geo"
    with pytest.raises(ReferenceError_, match="not a step"):
        parse_value("$step.nope", {"geo"})
    spec = WorkflowSpec.model_validate(_flow(_page(place="$step.geo"), GEO))
    graph = build_graph(spec)
    assert graph.order == ("geo", "page")
    assert graph.edges[0].via == ("$step.geo",)


def test_whole_output_reference_validates_clean_and_an_unknown_step_is_named():
    report = validate_workflow(_flow(GEO, _page(place="$step.geo")), registry=REGISTRY)
    assert report.issues == ()
    report = validate_workflow(_flow(GEO, _page(place="$step.gep")), registry=REGISTRY)
    (issue,) = report.issues
    assert (issue.code, issue.path) == ("invalid_reference", "steps[1].input_mapping.place")
    assert "`gep`, which is not a step" in issue.message


def test_a_literal_step_id_is_refused_with_the_whole_output_form():
    report = validate_workflow(_flow(GEO, _page(payload="geo")), registry=REGISTRY)
    (issue,) = report.errors
    assert issue.code == "step_reference_without_field"
    assert "`$step.geo`" in issue.message
    assert '{"$literal": "geo"}' in issue.message
    assert "`geo.lat`" in issue.message
    quoted = _page(payload={"$literal": "geo"})
    assert validate_workflow(_flow(GEO, quoted), registry=REGISTRY).issues == ()


def test_output_naming_a_step_offers_the_whole_output_form():
    report = validate_workflow(_flow(GEO, outputs={"place": "geo"}), registry=REGISTRY)
    (issue,) = report.errors
    assert issue.code == "unknown_output_reference"
    assert "`$step.geo`" in issue.message


def test_lookalike_in_a_reference_names_the_character_and_the_ascii():
    lookalike = f"g{CYRILLIC_E}o.lat"
    report = validate_workflow(_flow(GEO, _page(lat=lookalike)), registry=REGISTRY)
    (issue,) = report.errors
    assert (issue.code, issue.path) == ("confusable_character", "steps[1].input_mapping.lat")
    assert "CYRILLIC SMALL LETTER IE, U+0435" in issue.message
    assert "`geo.lat`" in issue.message


def test_lookalike_in_an_input_reference_is_named_in_the_invalid_reference():
    for bad in ("$input.c\u0456ty", "$in\u0440ut.city"):  # Cyrillic i, p
        report = validate_workflow(_flow(_page(city=bad)), registry=REGISTRY)
        (issue,) = report.errors
        assert issue.code == "invalid_reference"
        assert "CYRILLIC SMALL LETTER" in issue.message
        assert "`$input.city`" in issue.message


def test_lookalike_in_a_step_id_and_a_tool_name_is_named():
    step = {**GEO, "id": f"g{CYRILLIC_E}o"}
    report = validate_workflow(_flow(step), registry=REGISTRY)
    (issue,) = report.errors
    assert (issue.code, issue.path) == ("schema_invalid", "steps[0].id")
    assert "looks like `e`" in issue.message
    assert "write `geo`" in issue.message
    flow = {**_flow(GEO), "tools": [f"g{CYRILLIC_E}ocode", "geocode"]}
    (issue,) = validate_workflow(flow, registry=REGISTRY).errors
    assert (issue.code, issue.path) == ("confusable_character", "tools[0]")
    tool_step = {**GEO, "tool": f"g{CYRILLIC_E}ocode"}
    (issue,) = validate_workflow(_flow(tool_step), registry=REGISTRY).errors
    assert issue.path == "steps[0].tool"
    assert "write `geocode`" in issue.message


def test_confusables_helpers():
    assert skeleton(f"w{CYRILLIC_E}ather") == "weather"
    assert describe("weather") == ""
    expected = "`\u00e9` (LATIN SMALL LETTER E WITH ACUTE, U+00E9) looks like `e`"
    assert describe("caf\u00e9") == expected


def test_every_issue_code_is_documented_with_an_example():
    text = (Path(__file__).resolve().parents[2] / "docs" / "validation.md").read_text()
    sections = text.split("\n### ")[1:]
    documented = {section.split("`")[1]: section for section in sections}
    assert set(documented) >= ISSUE_CODES, sorted(ISSUE_CODES - set(documented))
    for code in ISSUE_CODES:
        assert "\n> " in documented[code], f"`{code}` has no example message"


def _llm(**extra) -> dict:
    step = {"id": "digest", "kind": "llm", "prompt": "Sum up {{place}}"}
    return {**step, "input_mapping": {"place": "geo.name"}, **extra}


def test_an_llm_answer_without_output_schema_is_text():
    flow = _flow(GEO, _llm(), _page(first="digest.result.summary"))
    (issue,) = validate_workflow(flow, registry=REGISTRY).errors
    assert (issue.code, issue.path) == ("unknown_output_field", "steps[2].input_mapping.first")
    assert "`digest.result` is a string" in issue.message
    assert "output_schema" in issue.message


def test_a_foreach_result_list_is_indexed_not_read_by_field():
    each = {
        "id": "pages",
        "kind": "foreach",
        "tool": "fetch",
        "input_mapping": {"items": ["https://a.example", "https://b.example"]},
        "item_mapping": {"url": "$item"},
    }
    ok = validate_workflow(_flow(each, _page(first="pages.items.0.body")), registry=REGISTRY)
    assert ok.errors == ()
    flow = _flow(each, _page(first="pages.items.body"))
    (issue,) = validate_workflow(flow, registry=REGISTRY).errors
    assert "`pages.items` is an array" in issue.message
    assert "`pages.items.0`" in issue.message


def test_a_definition_that_cannot_be_salvaged_reports_its_schema_issues_only():
    for data in ({"steps": "none"}, {"name": "x"}, [1]):
        report = validate_workflow(data, registry=REGISTRY)
        assert {i.code for i in report.issues} == {"schema_invalid"}
        assert report.spec is None


def test_placeholders_keep_their_issues_out_of_the_report():
    broken = {"id": "page", "kind": "teleport", "input_mapping": {"url": "$input.nope"}}
    edge = {"from": "geo", "too": "page"}
    flow = {**_flow(GEO, broken), "edges": [edge], "outputs": {"x": "geo.nme"}}
    report = validate_workflow(flow, registry=REGISTRY)
    assert sorted((i.code, i.path) for i in report.issues) == [
        ("schema_invalid", "edges[0].to"),
        ("schema_invalid", "edges[0].too"),
        ("schema_invalid", "steps[1]"),
        ("unknown_output_field", "outputs.x"),
    ]
