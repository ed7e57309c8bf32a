"""workflows.validator: golden flow files, every problem at once, locations and messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.errors import FlowpilotError
from workflows.schema import WorkflowSpec
from workflows.validator import ISSUE_CODES, WorkflowInvalid, validate_workflow

FLOWS = Path(__file__).resolve().parent.parent / "data" / "flows"


@dataclass(frozen=True)
class FakeTool:
    name: str
    input_schema: dict[str, Any]
    outputs: tuple[str, ...] = ()
    env: frozenset[str] = frozenset()
    deprecated: bool = False
    replacement: str | None = None
    credential: str | None = None
    secret: frozenset[str] = frozenset()  # its credentials (tools.secrets decides for real)
    slots: frozenset[str] = frozenset()  # the arguments its credentials read
    types: tuple[tuple[str, dict], ...] = ()  # output field -> JSON Schema
    kind: str = "http"

    def output_type(self, name: str) -> dict | None:
        return dict(self.types).get(name)

    def env_names(self) -> frozenset[str]:
        return self.env | self.secret

    def secret_env_names(self) -> frozenset[str]:
        return self.secret

    def credential_params(self) -> frozenset[str]:
        return self.slots

    def credential_name(self) -> str | None:
        return self.credential


@dataclass(frozen=True)
class FakeRegistry:
    tools: dict[str, FakeTool] = field(default_factory=dict)

    def get(self, name: str) -> FakeTool | None:
        return self.tools.get(name)


def _props(**types: str) -> dict[str, dict]:
    return {name: {"type": kind} for name, kind in types.items()}


REGISTRY = FakeRegistry(
    {
        t.name: t
        for t in (
            FakeTool(
                "geocode",
                {
                    "type": "object",
                    "properties": _props(city="string", country="string"),
                    "required": ["city"],
                    "additionalProperties": False,
                },
                ("lat", "lon", "name"),
                types=(
                    ("lat", {"type": "number"}),
                    ("lon", {"type": "number"}),
                    ("name", {"type": "string"}),
                ),
            ),
            FakeTool(
                "search",
                {"type": "object", "properties": _props(q="string"), "required": ["q"]},
                ("results", "count"),
                types=(
                    (
                        "results",
                        {
                            "type": "array",
                            "items": {"$ref": "#/$defs/hit"},
                            "$defs": {
                                "hit": {
                                    "type": "object",
                                    "properties": {
                                        "id": {"type": "integer"},
                                        "name": {"type": "string"},
                                        "tags": {"type": "array", "items": {"type": "string"}},
                                    },
                                }
                            },
                        },
                    ),
                    ("count", {"type": "integer"}),
                ),
            ),
            FakeTool(
                "notify",
                {
                    "type": "object",
                    "properties": {
                        **_props(name="string", id="integer", tags="array"),
                        "score": {"type": ["number", "null"]},
                    },
                    "required": ["name"],
                },
            ),
            FakeTool(
                "forecast",
                {
                    "type": "object",
                    "properties": {
                        **_props(lat="number", lon="number"),
                        "days": {"type": "integer", "minimum": 1, "maximum": 16},
                    },
                    "required": ["lat", "lon"],
                },
                ("temperature", "summary"),
                types=(("temperature", {"type": "number"}), ("summary", {"type": "string"})),
            ),
            FakeTool(
                "fetch",
                {
                    "type": "object",
                    "properties": _props(url="string"),
                    "required": ["url"],
                    "additionalProperties": True,
                },
                env=frozenset({"API_TOKEN"}),
            ),
            FakeTool(
                "geocode_old",
                {"type": "object", "properties": _props(q="string")},
                ("lat", "lon"),
                deprecated=True,
                replacement="geocode",
            ),
            FakeTool("fax", {"type": "object"}, deprecated=True),
            FakeTool("clock", {"type": "object"}, ("now",), kind="builtin"),
            FakeTool(
                "repo_issues",
                {"type": "object", "properties": _props(repo="string")},
                credential="github_ap",
            ),
            FakeTool(
                "report_api",
                {"type": "object", "properties": _props(report="string", key="string")},
                ("title", "body"),
                secret=frozenset({"STOKEN"}),
                slots=frozenset({"key"}),
            ),
            FakeTool(
                "send_email",
                {
                    "type": "object",
                    "properties": _props(to="string", subject="string", body="string"),
                    "required": ["to", "subject", "body"],
                },
            ),
        )
    }
)


def _caller(name: str, child: str) -> WorkflowSpec:
    step = {"id": "inner", "kind": "workflow", "workflow": child}
    step["input_mapping"] = {"city": "$input.city"}
    return WorkflowSpec.model_validate(
        {"name": name, "inputs": {"city": {"type": "string"}}, "steps": [step]}
    )


# The active workflows `workflow` steps of the golden files run (no database here).
WORKFLOWS = {
    "weather_at": WorkflowSpec.model_validate(
        {
            "name": "weather_at",
            "inputs": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}},
            "steps": [
                {
                    "id": "geo",
                    "kind": "tool",
                    "tool": "geocode",
                    "input_mapping": {"city": "$input.city"},
                },
                {
                    "id": "wx",
                    "kind": "tool",
                    "tool": "forecast",
                    "input_mapping": {"lat": "geo.lat", "lon": "geo.lon", "days": "$input.days"},
                },
            ],
            "outputs": {"temperature": "wx.temperature", "summary": "wx.summary"},
        }
    ),
    "nest1": _caller("nest1", "weather_at"),
    **{f"nest{n}": _caller(f"nest{n}", f"nest{n - 1}") for n in range(2, 7)},
    "ping": _caller("ping", "pong"),
    "pong": _caller("pong", "ping"),
}


@dataclass(frozen=True)
class FakeCredentials:
    stored: frozenset[str] = frozenset({"github_app"})

    def names(self) -> frozenset[str]:
        return self.stored


CREDENTIALS = FakeCredentials()


def load_flow(path: Path) -> tuple[Any, list[str]]:
    """The flow data and its ``# expect:`` codes (first line of the file)."""
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith("# expect:"), f"{path.name} must start with `# expect: codes`"
    expected = [c.strip() for c in first.removeprefix("# expect:").split(",") if c.strip()]
    return yaml.safe_load(text), sorted(expected)


def codes(report) -> list[str]:
    return sorted(issue.code for issue in report.issues)


def golden_files(kind: str) -> list[Path]:
    return sorted((FLOWS / kind).glob("*.yaml"))


# --- Golden corpus -------------------------------------------------------------


@pytest.mark.parametrize("path", golden_files("invalid"), ids=lambda p: p.stem)
def test_invalid_golden_flow(path):
    data, expected = load_flow(path)
    report = validate_workflow(
        data, registry=REGISTRY, workflows=WORKFLOWS, credentials=CREDENTIALS
    )
    assert codes(report) == expected, [f"{i.path}: {i.message}" for i in report.issues]
    assert path.stem in expected, "a golden file shows the issue it is named after"


@pytest.mark.parametrize("path", golden_files("valid"), ids=lambda p: p.stem)
def test_valid_golden_flow(path):
    data, expected = load_flow(path)
    report = validate_workflow(
        data, registry=REGISTRY, workflows=WORKFLOWS, credentials=CREDENTIALS
    )
    assert expected == []
    assert report.issues == (), [f"{i.path}: {i.message}" for i in report.issues]
    assert report.ok
    assert report.graph is not None
    assert report.spec is not None


def test_every_code_has_a_golden_file():
    assert {p.stem for p in golden_files("invalid")} == ISSUE_CODES


# --- All problems at once --------------------------------------------------------


def test_six_different_problems_are_reported_at_once():
    data = {
        "name": "six",
        "inputs": {"city": {}},
        "tools": ["geocode", "forecast"],
        "steps": [
            {
                "id": "geo",
                "kind": "tool",
                "tool": "geocode",
                "input_mapping": {"cty": "$input.city"},
            },
            {
                "id": "weather",
                "kind": "tool",
                "tool": "forecast",
                "input_mapping": {"lat": "geo.lat", "lon": "geo.lng", "days": "$input.dayz"},
            },
            {"id": "page", "kind": "tool", "tool": "fetch", "input_mapping": {"url": "x"}},
        ],
        "edges": [{"from": "weather", "to": "ghost"}],
    }
    report = validate_workflow(data, registry=REGISTRY)
    assert [(i.code, i.path) for i in report.issues] == [
        ("edge_unknown_step", "edges[0].to"),
        ("missing_required_param", "steps[0].input_mapping"),
        ("unknown_param", "steps[0].input_mapping.cty"),
        ("unknown_input", "steps[1].input_mapping.days"),
        ("unknown_output_field", "steps[1].input_mapping.lon"),
        ("tool_not_allowed", "steps[2].tool"),
    ]
    assert len({i.code for i in report.issues}) == 6
    assert not report.ok


# --- Locations and messages ----------------------------------------------------


def test_schema_paths_drop_the_union_tag_and_name_the_step():
    data = {
        "name": "s",
        "steps": [
            {"id": "a", "kind": "tool", "tool": "fetch"},
            {"id": "b", "kind": "tool", "tool": "fetch"},
            {"id": "c", "kind": "tool", "tool": "fetch", "retry": {"max_attempts": 0}},
        ],
    }
    report = validate_workflow(data, registry=REGISTRY)
    (issue,) = [i for i in report.issues if i.code == "schema_invalid"]
    assert issue.path == "steps[2].retry.max_attempts"
    assert issue.step_id == "c"
    assert "greater than or equal to 1" in issue.message
    assert report.spec is None
    assert report.graph is None


def test_schema_messages_are_readable():
    data = {"name": "s", "steps": [{"id": "a"}, {"id": "b", "kind": "repeat"}], "extra": 1}
    messages = {i.path: i.message for i in validate_workflow(data, registry=REGISTRY).issues}
    assert messages == {
        "extra": "`extra` is not a known field; the fields here are `budget`, `concurrency`, "
        "`description`, `edges`, `goal`, `inputs`, `max_parallel`, `name`, `notifications`, "
        "`outputs`, `queue`, "
        "`retention_days`, `schedule`, `steps`, `tests`, `tools`, `triggers`",
        "steps[0]": "`steps[0]` needs a `kind`: one of `approval`, `decision`, `foreach`, `llm`, "
        "`loop`, `tool`, `transform`, `workflow`",
        "steps[1]": "`steps[1]`: unknown step kind `repeat`; use one of `approval`, `decision`, "
        "`foreach`, `llm`, `loop`, `tool`, `transform`, `workflow`",
    }


@pytest.mark.parametrize("data", [None, [1, 2], "name: x"])
def test_non_mapping_data_is_a_schema_issue(data):
    (issue,) = validate_workflow(data, registry=REGISTRY).issues
    assert (issue.code, issue.path) == ("schema_invalid", "")


def test_not_ancestor_message_names_both_steps():
    data, _ = load_flow(FLOWS / "invalid" / "not_ancestor.yaml")
    (issue,) = validate_workflow(data, registry=REGISTRY).issues
    assert issue.path == "steps[1].input_mapping.body"
    assert issue.step_id == "report"
    assert issue.message.startswith(
        "step `report` reads `page.body`, but `page` runs after `report`"
    )


def test_cycle_message_shows_the_references_that_made_the_edges():
    data, _ = load_flow(FLOWS / "invalid" / "cycle.yaml")
    (issue,) = validate_workflow(data, registry=REGISTRY).issues
    assert issue.message == (
        "steps form a cycle: `first` → `second` (reads `first.body`) → `first` "
        "(reads `second.body`)"
    )
    assert issue.path == "steps[0].input_mapping.previous"


def test_explicit_cycles_are_each_reported_once():
    steps = [_fetch(s) for s in ("a", "b", "c", "x", "y")]
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("x", "y"), ("y", "x")]
    report = validate_workflow(_flow(steps, edges), registry=REGISTRY)
    assert [(i.code, i.path, i.message) for i in report.issues] == [
        ("cycle", "edges[2]", "steps form a cycle: `a` → `b` → `c` → `a`"),
        ("cycle", "edges[4]", "steps form a cycle: `x` → `y` → `x`"),
    ]
    assert report.graph is None


def test_a_step_reading_itself_is_a_self_loop_at_the_reference():
    report = validate_workflow(_flow([_fetch("a", again="a.body")]), registry=REGISTRY)
    assert [(i.code, i.path, i.step_id) for i in report.issues] == [
        ("self_loop", "steps[0].input_mapping.again", "a")
    ]


def test_literal_suggests_the_close_step_and_quoted_literals_are_silent():
    steps = [
        {"id": "geo", "kind": "tool", "tool": "geocode", "input_mapping": {"city": "Oslo"}},
        _fetch("page", lat="gep.lat", host={"$literal": "api.example.com"}),
    ]
    (issue,) = validate_workflow(_flow(steps), registry=REGISTRY).issues
    assert issue.code == "unknown_step_reference"
    assert issue.severity == "error"
    assert "(did you mean `geo`?)" in issue.message


def test_issues_sort_by_path_with_numbers_in_order():
    steps = [_fetch(f"s{i}", x=f"$input.missing{i}") for i in range(12)]
    report = validate_workflow(_flow(steps), registry=REGISTRY)
    assert [i.step_id for i in report.issues] == [f"s{i}" for i in range(12)]
    again = validate_workflow(_flow(steps), registry=REGISTRY)
    assert again.issues == report.issues


def test_raise_for_errors_carries_the_report():
    data, _ = load_flow(FLOWS / "invalid" / "unknown_input.yaml")
    report = validate_workflow(data, registry=REGISTRY)
    with pytest.raises(WorkflowInvalid) as caught:
        report.raise_for_errors()
    assert caught.value.report is report
    assert caught.value.code == "workflow_invalid"
    assert isinstance(caught.value, FlowpilotError)
    assert "steps[0].input_mapping.extra" in caught.value.message


def test_warnings_alone_keep_the_report_ok():
    data, _ = load_flow(FLOWS / "invalid" / "unused_input.yaml")
    report = validate_workflow(data, registry=REGISTRY)
    assert report.ok
    assert [w.code for w in report.warnings] == ["unused_input"]
    assert report.errors == ()
    report.raise_for_errors()


def test_a_spec_is_accepted_as_well_as_a_mapping():
    data, _ = load_flow(FLOWS / "valid" / "weather_report.yaml")
    report = validate_workflow(WorkflowSpec.model_validate(data), registry=REGISTRY)
    assert report.issues == ()
    assert report.graph.order == ("geo", "weather", "mail")


def test_without_a_registry_tool_checks_are_skipped():
    data, _ = load_flow(FLOWS / "invalid" / "unknown_tool.yaml")
    assert validate_workflow(data, registry=None).issues == ()


# --- Tools and parameters ------------------------------------------------------


def test_foreach_parameters_span_input_and_item_mapping():
    each = {
        "id": "each",
        "kind": "foreach",
        "tool": "geocode",
        "input_mapping": {"items": ["Oslo", "Bergen"], "country": "NO"},
        "item_mapping": {"city": "$item"},
    }
    assert validate_workflow(_flow([each]), registry=REGISTRY).issues == ()
    del each["item_mapping"]
    report = validate_workflow(_flow([each]), registry=REGISTRY)
    assert codes(report) == ["missing_required_param"]


@pytest.mark.parametrize(
    ("schema", "flagged"),
    [
        ({"type": "object", "properties": {"url": {}}, "additionalProperties": False}, True),
        ({"type": "object", "properties": {"url": {}}}, True),
        ({"type": "object", "properties": {"url": {}}, "additionalProperties": True}, False),
        ({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}, False),
        ({"type": "object"}, False),
        ({}, False),
    ],
)
def test_unknown_param_policy(schema, flagged):
    registry = FakeRegistry({"t": FakeTool("t", schema)})
    step = {"id": "a", "kind": "tool", "tool": "t", "input_mapping": {"url": "u", "zoom": 3}}
    report = validate_workflow(_flow([step]), registry=registry)
    assert codes(report) == (["unknown_param"] if flagged else [])


@pytest.mark.parametrize(
    ("value", "mismatch"),
    [
        (3, False),
        ("three", True),
        (0, True),  # below minimum: the whole property schema applies
        (["$input.days"], False),  # not a literal: checked at run time
        ("$input.days", False),
    ],
)
def test_param_type_mismatch_checks_literals_only(value, mismatch):
    step = {
        "id": "w",
        "kind": "tool",
        "tool": "forecast",
        "input_mapping": {"lat": 1.5, "lon": 2, "days": value},
    }
    data = {"name": "t", "inputs": {"days": {"type": "integer"}}, "steps": [step]}
    report = validate_workflow(data, registry=REGISTRY)
    assert ("param_type_mismatch" in codes(report)) is mismatch


def test_param_schemas_may_use_root_defs():
    schema = {
        "type": "object",
        "properties": {"unit": {"$ref": "#/$defs/unit"}},
        "$defs": {"unit": {"enum": ["C", "F"]}},
    }
    registry = FakeRegistry({"t": FakeTool("t", schema)})
    step = {"id": "a", "kind": "tool", "tool": "t", "input_mapping": {"unit": "K"}}
    (issue,) = validate_workflow(_flow([step]), registry=registry).issues
    assert issue.code == "param_type_mismatch"
    assert "'K' is not one of ['C', 'F']" in issue.message


def test_llm_step_tools_must_be_known_and_allowed():
    llm = {"id": "ask", "kind": "llm", "prompt": "hi", "tools": ["geocode", "teleport"]}
    data = {"name": "t", "tools": ["geocode"], "steps": [llm]}
    report = validate_workflow(data, registry=REGISTRY)
    assert [(i.code, i.path) for i in report.issues] == [
        ("tool_not_allowed", "steps[0].tools[1]"),
        ("unknown_tool", "steps[0].tools[1]"),
    ]


def test_llm_step_tools_are_allowed_when_the_flow_has_no_allowlist():
    llm = {"id": "ask", "kind": "llm", "prompt": "hi", "tools": ["geocode"]}
    assert codes(validate_workflow(_flow([llm]), registry=REGISTRY)) == []


def test_env_into_an_llm_prompt_is_refused():
    llm = {"id": "ask", "kind": "llm", "prompt": "{{t}}", "input_mapping": {"t": "$env.KEY"}}
    assert codes(validate_workflow(_flow([llm]), registry=REGISTRY)) == ["env_in_prompt"]


def test_error_of_a_continue_step_may_be_read():
    steps = [
        {**_fetch("page"), "on_error": "continue"},
        _fetch("report", failure="page.error.message"),
    ]
    assert validate_workflow(_flow(steps), registry=REGISTRY).issues == ()


def test_error_of_a_tool_with_declared_outputs_needs_continue():
    steps = [
        {"id": "geo", "kind": "tool", "tool": "geocode", "input_mapping": {"city": "Oslo"}},
        _fetch("report", failure="geo.error"),
    ]
    assert codes(validate_workflow(_flow(steps), registry=REGISTRY)) == [
        "error_ref_without_continue"
    ]


# --- Large graphs ------------------------------------------------------------


def _large_chain(n: int) -> dict:
    steps = [_fetch("s00000", url="$input.url")]
    for i in range(1, n):
        older = f"s{max(i - 2, 0):05d}"
        steps.append(_fetch(f"s{i:05d}", prev=f"s{i - 1:05d}.body", older=f"{older}.status"))
    return {"name": "chain", "inputs": {"url": {}}, "steps": steps}


def _large_fan_out(n: int) -> dict:
    steps = [_fetch("root", url="$input.url"), _fetch("aux", url="root.body.next")]
    steps += [_fetch(f"leaf{i:05d}", a="root.body", b="aux.body") for i in range(n - 2)]
    return {"name": "fan", "inputs": {"url": {}}, "steps": steps}


@pytest.mark.parametrize("build", [_large_chain, _large_fan_out], ids=["chain", "fan-out"])
def test_five_thousand_steps_validate(build):
    report = validate_workflow(build(5000), registry=REGISTRY)
    untyped = [(i.code, i.step_id) for i in report.issues]
    # only the fan-out maps an untyped output into a typed parameter (`aux`'s `url`)
    assert untyped == ([("edge_type_unknown", "aux")] if build is _large_fan_out else [])
    assert len(report.graph.order) == 5000


def test_a_back_reference_in_a_long_chain_is_not_ancestor():
    data = _large_chain(2000)
    data["steps"][10]["input_mapping"]["late"] = "s01500.body"
    data["edges"] = [{"from": "s00010", "to": "s00011"}] + [
        {"from": f"s{i:05d}", "to": f"s{i + 1:05d}"} for i in range(11, 1500)
    ]
    report = validate_workflow(data, registry=REGISTRY)
    assert [(i.code, i.path) for i in report.issues] == [
        ("not_ancestor", "steps[10].input_mapping.late")
    ]


# --- helpers -------------------------------------------------------------------


def _fetch(step_id: str, **mapping: Any) -> dict:
    mapping.setdefault("url", "https://example.com/" + step_id)
    return {"id": step_id, "kind": "tool", "tool": "fetch", "input_mapping": mapping}


def _flow(steps: list[dict], edges: list[tuple[str, str]] = ()) -> dict:
    return {
        "name": "t",
        "steps": steps,
        "edges": [{"from": source, "to": target} for source, target in edges],
    }
