"""tools.versions: what changed between two definitions of a tool, and how much.

Each rule is tried on one change of a real tool's definition (``github_issues``, as
the example file stores it), the rest left alone.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import EXAMPLES_DIR
from tools.loader import load_tool_file
from tools.versions import (
    MAJOR,
    MINOR,
    PATCH,
    Change,
    bump_of,
    changes_between,
    definition_diff,
    next_version,
)


@pytest.fixture(scope="module")
def issues() -> dict[str, Any]:
    (spec,) = load_tool_file(EXAMPLES_DIR / "tools" / "github_issues.yaml")
    return spec.stored()


def changed(base: dict[str, Any], edit) -> list[tuple[str, str]]:
    new = copy.deepcopy(base)
    edit(new)
    return [(c.level, c.what) for c in changes_between(base, new)]


def props(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["input_schema"]["properties"]


def test_the_same_definition_has_no_changes(issues):
    assert changes_between(issues, copy.deepcopy(issues)) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda s: props(s).pop("state"), [(MAJOR, "input `state` removed")]),
        (
            lambda s: (
                props(s).update(since={"type": "string"}),
                s["input_schema"]["required"].append("since"),
            ),
            [(MAJOR, "input `since` added, required")],
        ),
        (
            lambda s: props(s).update(since={"type": "string"}),
            [(MINOR, "input `since` added (optional)")],
        ),
        (
            lambda s: s["input_schema"]["required"].append("state"),
            [(MAJOR, "input `state` now required")],
        ),
        (
            lambda s: s["input_schema"]["required"].remove("repo"),
            [(MINOR, "input `repo` now optional")],
        ),
        (
            lambda s: props(s)["state"]["enum"].remove("all"),
            [(MAJOR, "input `state`: values removed: all")],
        ),
        (
            lambda s: props(s)["state"]["enum"].append("draft"),
            [(MINOR, "input `state`: values added: draft")],
        ),
        (
            lambda s: props(s)["per_page"].update(type="string"),
            [(MAJOR, 'input `per_page`: type ["integer"] → ["string"]')],
        ),
        (
            lambda s: props(s)["per_page"].update(type="number"),
            [(MINOR, 'input `per_page`: type ["integer"] → ["number"]')],
        ),
        (
            lambda s: props(s)["per_page"].update(type=["integer", "null"]),
            [(MINOR, 'input `per_page`: type ["integer"] → ["integer","null"]')],
        ),
        (
            lambda s: props(s)["per_page"].update(maximum=50),
            [(MAJOR, "input `per_page`: maximum 100 → 50")],
        ),
        (
            lambda s: props(s)["per_page"].update(maximum=200),
            [(MINOR, "input `per_page`: maximum 100 → 200")],
        ),
        (
            lambda s: props(s)["per_page"].pop("minimum"),
            [(MINOR, "input `per_page`: minimum 1 → null")],
        ),
        (
            lambda s: props(s)["owner"].update(pattern="^[a-z]+$"),
            [(MAJOR, "input `owner`: pattern null → ^[a-z]+$")],
        ),
        (
            lambda s: props(s)["per_page"].update(description="How many a page"),
            [(PATCH, "input `per_page`: description changed")],
        ),
        (
            lambda s: s["input_schema"].update(additionalProperties=False),
            [(MAJOR, "inputs it does not declare are now refused")],
        ),
    ],
)
def test_input_changes(issues, edit, expected):
    assert changed(issues, edit) == expected


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda s: (
                s["outputs"].remove("pages"),
                s["output_types"].pop("pages"),
                s["http"]["response_extract"].pop("pages"),
            ),
            [(MAJOR, "output `pages` removed")],
        ),
        (
            lambda s: (
                s["outputs"].append("etag"),
                s["http"]["response_extract"].update(etag="$headers.etag"),
            ),
            [(MINOR, "output `etag` added")],
        ),
        (
            lambda s: s["output_types"].update(rate_limit_remaining={"type": "string"}),
            [(MINOR, "output `rate_limit_remaining`: type declared")],
        ),
        (
            lambda s: s["output_types"].update(count={"type": "string"}),
            [(MAJOR, 'output `count`: type ["integer"] → ["string"]')],
        ),
        (
            lambda s: s["output_types"].update(count={"type": ["integer", "null"]}),
            [(MAJOR, 'output `count`: type ["integer"] → ["integer","null"]')],  # readers get null
        ),
        (
            lambda s: s["output_types"].update(latest_title={"type": "string"}),
            [
                (MINOR, 'output `latest_title`: type ["null","string"] → ["string"]')
            ],  # never null now
        ),
        (
            lambda s: s["http"]["response_extract"].update(count="items.length"),
            [(MAJOR, "output `count` read from count → items.length")],
        ),
    ],
)
def test_output_changes(issues, edit, expected):
    assert changed(issues, edit) == expected


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda s: s["http"]["auth"].update(token="{{env.GH_PAT}}"), [(MAJOR, "auth changed")]),
        (
            lambda s: s["http"]["request"]["secret_headers"].append("X-Key"),
            [(MAJOR, "auth changed")],
        ),
        (
            lambda s: s["http"]["request"].update(method="POST"),
            [(MAJOR, "what is called: GET → POST")],
        ),
        (
            lambda s: s["http"].update(base_url="https://ghe.example.com/api/v3"),
            [
                (
                    MINOR,
                    "where it is called: {{env.GITHUB_API_BASE_URL:-https://api.github.com}} → https://ghe.example.com/api/v3",
                )
            ],
        ),
        (
            lambda s: s["http"]["request"]["headers"].update(
                {"X-GitHub-Api-Version": "2026-03-10"}
            ),
            [
                (
                    MINOR,
                    "what is sent besides the inputs: "
                    '{"Accept":"application/vnd.github+json","X-GitHub-Api-Version":"2022-11-28"}'
                    " → "
                    '{"Accept":"application/vnd.github+json","X-GitHub-Api-Version":"2026-03-10"}',
                )
            ],
        ),
        (
            lambda s: s.update(idempotent=False),
            [(MINOR, "what is sent besides the inputs: true → false")],
        ),
        (lambda s: s.update(timeout=30.0), [(PATCH, "timeout: 10.0 → 30.0")]),
        (
            lambda s: s.update(description="Issues."),
            [
                (
                    PATCH,
                    "description: Every issue (and pull request) of a GitHub repository, "
                    "following GitHub's Link … → Issues.",
                )
            ],
        ),
        (
            lambda s: s["http"].update(max_redirects=3),
            [(PATCH, "http.max_redirects: 5 → 3")],
        ),
        (lambda s: s.update(kind="mcp"), [(MAJOR, "kind http → mcp")]),
    ],
)
def test_auth_target_and_other_changes(issues, edit, expected):
    assert changed(issues, edit) == expected


def test_a_change_is_counted_once_where_its_rule_reads_it(issues):
    def edit(s):
        s["secret_env"] = ["GITHUB_TOKEN"]
        s["queue"] = "github"
        s["retry"]["max_attempts"] = 5

    assert changed(issues, edit) == [
        (MAJOR, "auth changed"),
        (MINOR, "what is sent besides the inputs: null → github"),
        (PATCH, "retry.max_attempts: 3 → 5"),
    ]


def test_mcp_tool_changes():
    old = {
        "name": "time_now",
        "kind": "mcp",
        "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}},
        "outputs": ["result"],
        "mcp": {
            "server": {"command": "uvx", "args": ["mcp-server-time"]},
            "tool": "get_current_time",
        },
    }
    moved = copy.deepcopy(old)
    moved["mcp"]["server"]["args"] = ["mcp-server-time==2.0"]
    renamed = copy.deepcopy(old)
    renamed["mcp"]["tool"] = "now"

    assert [c.level for c in changes_between(old, moved)] == [MINOR]
    assert [c.level for c in changes_between(old, renamed)] == [MAJOR]


def test_versions_are_bumped_by_the_biggest_change():
    assert bump_of([]) == PATCH
    assert (
        bump_of([Change("a", "", PATCH), Change("b", "", MAJOR), Change("c", "", MINOR)]) == MAJOR
    )
    assert next_version("1.4.2", MAJOR) == "2.0.0"
    assert next_version("1.4.2", MINOR) == "1.5.0"
    assert next_version("1.4.2", PATCH) == "1.4.3"


def test_two_definitions_side_by_side(issues):
    new = copy.deepcopy(issues)
    new["timeout"] = 30.0

    diff = definition_diff(issues, new, a="github_issues 1.0.0", b="github_issues 1.0.1")

    assert diff.splitlines()[:2] == ["--- github_issues 1.0.0", "+++ github_issues 1.0.1"]
    assert '-  "timeout": 10.0' in diff
    assert '+  "timeout": 30.0' in diff


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (  # an output kept, now read through an extract: it comes from elsewhere
            lambda s: s["http"]["response_extract"].pop("count"),
            [(MAJOR, "output `count` read from count → null")],
        ),
        (
            lambda s: s["http"].update(pagination=None),
            [(MAJOR, "how the answer is read: ")],  # then the whole pagination, cut
        ),
        (
            lambda s: s["input_schema"].update(additionalProperties={"type": "integer"}),
            [(MAJOR, "inputs it does not declare: schema changed")],
        ),
    ],
)
def test_changes_to_how_outputs_are_made_are_breaking(issues, edit, expected):
    found = changed(issues, edit)
    assert [level for level, _ in found] == [level for level, _ in expected]
    for (_, what), (_, start) in zip(found, expected, strict=True):
        assert what.startswith(start), what


def test_declaring_outputs_where_none_were_is_breaking():
    old = {"name": "t", "kind": "http", "outputs": [], "http": {"response_extract": {}}}
    new = {
        "name": "t",
        "kind": "http",
        "outputs": ["x"],
        "http": {"response_extract": {"x": "a.b"}},
    }

    assert [(c.level, c.what) for c in changes_between(old, new)] == [
        (MAJOR, "outputs now declared: x")
    ]
