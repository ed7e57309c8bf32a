"""The review diff: a pure function over two workflow specs, and ``exportflow --diff``."""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import EXAMPLES_DIR, write_flow
from workflows.diff import FieldChange, diff_lines, field_text, value_changes, workflow_diff
from workflows.files import read_workflow_file
from workflows.models import Workflow
from workflows.schema import WorkflowSpec


def geo() -> dict:
    return read_workflow_file(EXAMPLES_DIR / "geo_weather.yaml")


def spec(data: dict) -> WorkflowSpec:
    return WorkflowSpec.model_validate(data)


def revised() -> dict:
    """geo_weather with `weather` changed (mapping, retry, timeout) and `summary` added."""
    data = geo()
    weather = data["steps"][1]
    weather["input_mapping"]["latitude"] = "locate.latitude"
    weather["retry"] = {"max_attempts": 4}
    weather["timeout"] = 20
    data["steps"].append(
        {
            "id": "summary",
            "kind": "transform",
            "expression": "{t: t, c: c}",
            "input_mapping": {"t": "weather.temperature", "c": "country.name"},
        }
    )
    return data


def test_identical_specs_have_an_empty_diff():
    diff = workflow_diff(spec(geo()), spec(geo()))

    assert diff.is_empty
    assert diff.counts() == {"added": 0, "removed": 0, "changed": 0}
    assert diff_lines(diff, old_label="a", new_label="b")[-1] == "no changes"


def test_a_changed_and_an_added_step_with_their_edges():
    diff = workflow_diff(spec(geo()), spec(revised()))

    assert [(s.step_id, s.change) for s in diff.steps] == [
        ("weather", "changed"),
        ("summary", "added"),
    ]
    weather = diff.steps[0]
    assert [f.path for f in weather.fields] == [
        "input_mapping.latitude",
        "retry",
        "timeout",
    ]
    assert weather.fields[0].old == "locate.lat"
    assert weather.fields[0].new == "locate.latitude"
    assert weather.fields[1].old is None
    assert weather.fields[1].new["max_attempts"] == 4
    assert [(e.source, e.target, e.change, e.inferred) for e in diff.edges] == [
        ("country", "summary", "added", True),
        ("weather", "summary", "added", True),
    ]
    assert diff.step_status("summary") == "added"
    assert diff.step_status("weather") == "changed"
    assert diff.step_status("locate") == "unchanged"
    assert diff.tools_added == diff.tools_removed == ()


def test_removed_steps_follow_in_old_order_and_take_their_edges_and_tools():
    old = geo()
    new = copy.deepcopy(old)
    new["steps"] = [new["steps"][0]]
    new["tools"] = ["ip_geolocate", "ip_lookup"]
    new["outputs"] = {"city": "locate.city"}

    diff = workflow_diff(spec(old), spec(new))

    assert [(s.step_id, s.change, s.tool) for s in diff.steps] == [
        ("weather", "removed", "weather_current"),
        ("country", "removed", "country_info"),
    ]
    assert {(e.source, e.target, e.change) for e in diff.edges} == {
        ("locate", "weather", "removed"),
        ("locate", "country", "removed"),
    }
    assert diff.tools_added == ("ip_lookup",)
    assert diff.tools_removed == ("country_info", "weather_current")
    assert [f.path for f in diff.fields][:2] == ["outputs.capital", "outputs.country"]
    assert all(not f.new_present for f in diff.fields)


def test_a_changed_tool_prompt_and_kind_are_field_changes():
    old = geo()
    new = copy.deepcopy(old)
    new["steps"][2]["tool"] = "country_facts"
    new["tools"] = ["ip_geolocate", "weather_current", "country_facts"]
    new["steps"][1] = {"id": "weather", "kind": "llm", "prompt": "Weather at {{locate.lat}}?"}

    diff = workflow_diff(spec(old), spec(new))

    by_id = {s.step_id: s for s in diff.steps}
    paths = [f.path for f in by_id["weather"].fields]
    assert "kind" in paths
    assert "prompt" in paths
    assert "tool" in paths
    tool = next(f for f in by_id["country"].fields if f.path == "tool")
    assert (tool.old, tool.new) == ("country_info", "country_facts")
    assert diff.tools_added == ("country_facts",)


def test_a_default_written_out_is_no_change():
    old = geo()
    new = copy.deepcopy(old)
    new["steps"][0]["on_error"] = "fail"  # the default

    assert workflow_diff(spec(old), spec(new)).is_empty


def test_explicit_edges_and_branch_labels_are_diffed():
    base = {
        "name": "branchy",
        "steps": [
            {
                "id": "pick",
                "kind": "decision",
                "branches": ["a", "b"],
                "conditions": {"a": "$input.x == `1`"},
                "default": "b",
            },
            {"id": "left", "kind": "transform", "expression": "`1`"},
            {"id": "right", "kind": "transform", "expression": "`2`"},
        ],
        "edges": [
            {"from": "pick", "to": "left", "when": "a"},
            {"from": "pick", "to": "right", "when": "b"},
        ],
    }
    new = copy.deepcopy(base)
    new["edges"][1]["when"] = "a"
    new["steps"][0]["conditions"]["a"] = "$input.x == `2`"

    diff = workflow_diff(spec(base), spec(new))

    assert [(e.target, e.when, e.change) for e in diff.edges] == [
        ("right", "a", "added"),
        ("right", "b", "removed"),
    ]
    assert [f.path for f in diff.steps[0].fields] == ["conditions.a"]


def test_the_order_is_deterministic():
    first = workflow_diff(spec(geo()), spec(revised())).as_dict()
    again = workflow_diff(spec(geo()), spec(revised())).as_dict()

    assert json.dumps(first) == json.dumps(again)
    assert first["summary"] == {"added": 1, "removed": 0, "changed": 1}


def test_value_changes_walks_dicts_and_names_absent_sides():
    changes = value_changes({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "d": 3}, "e": [1]})

    assert [field_text(c) for c in changes] == [
        "a.c: 2 → (absent)",
        "a.d: (absent) → 3",
        "e: (absent) → [1]",
    ]
    assert value_changes(1, 1.0) == [FieldChange("(value)", 1, 1.0)]
    long = field_text(FieldChange("x", "a" * 300, "b"))
    assert long.endswith('→ "b"')
    assert "…" in long


# --- exportflow --diff --------------------------------------------------------------------


@pytest.fixture
def two_versions(db, cli, tmp_path):
    cli("importflow", write_flow(tmp_path, geo(), "v1.yaml"))
    cli("importflow", write_flow(tmp_path, revised(), "v2.yaml"))


@pytest.mark.django_db(transaction=True)
def test_exportflow_diff_prints_text(cli, two_versions):
    result = cli("exportflow", "geo_weather", "--diff", "1", "2")

    assert result.code == 0, result.err
    assert result.lines[:4] == [
        "diff geo_weather v1 → v2",
        "steps: 1 added, 0 removed, 1 changed",
        "~ step weather (tool weather_current)",
        '    input_mapping.latitude: "locate.lat" → "locate.latitude"',
    ]
    assert "+ step summary (transform)" in result.lines
    assert "+ edge weather → summary (inferred)" in result.lines, result.out


@pytest.mark.django_db(transaction=True)
def test_exportflow_diff_as_json_and_the_reverse(cli, two_versions):
    result = cli("exportflow", "geo_weather", "--diff", "2", "1", "--format", "json")

    body = json.loads(result.out)
    assert (body["old"], body["new"]) == (2, 1)
    assert body["summary"] == {"added": 0, "removed": 1, "changed": 1}
    assert body["steps"][0]["fields"][0] == {
        "path": "input_mapping.latitude",
        "old": "locate.latitude",
        "new": "locate.lat",
    }
    assert [e["change"] for e in body["edges"]] == ["removed", "removed"]


@pytest.mark.django_db(transaction=True)
def test_exportflow_diff_refuses_what_is_missing_or_mistyped(cli, two_versions):
    missing = cli("exportflow", "geo_weather", "--diff", "1", "9")
    yaml_diff = cli("exportflow", "geo_weather", "--diff", "1", "2", "--format", "yaml")
    text_export = cli("exportflow", "geo_weather", "--format", "text")
    same = cli("exportflow", "geo_weather", "--diff", "2", "2")
    zero = cli("exportflow", "geo_weather", "--diff", "0", "2")
    not_a_number = cli("exportflow", "geo_weather", "--diff", "one", "2")

    assert missing.code == 1
    assert "no stored workflow `geo_weather` v9" in missing.err
    assert "not yaml" in yaml_diff.err
    assert "--format text is for --diff" in text_export.err
    assert same.lines[-1] == "no changes"
    assert "no stored workflow `geo_weather` v0" in zero.err
    assert not_a_number.code != 0


@pytest.mark.django_db(transaction=True)
def test_exportflow_diff_names_a_stored_definition_that_no_longer_parses(cli, two_versions):
    Workflow.objects.filter(name="geo_weather", version=1).update(definition={"steps": []})

    result = cli("exportflow", "geo_weather", "--diff", "1", "2")

    assert result.code == 1
    assert "the stored definition of `geo_weather v1` does not fit the workflow format" in (
        result.err
    )
