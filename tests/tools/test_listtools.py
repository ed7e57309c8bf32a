"""``listtools``: each tool's version, a tool's versions with what changed, and a diff
between two (the table and JSON of the whole list are in test_services.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES_DIR

pytestmark = pytest.mark.django_db


def load(cli, directory: Path, text: str) -> None:
    (directory / "github_issues.yaml").write_text(text)
    assert cli("loadtools", str(directory), "--no-builtin").code == 0


@pytest.fixture
def three_versions(cli, tmp_path) -> Path:
    """``github_issues`` as shipped (1.0.0), with a state value dropped (2.0.0), then
    with a longer timeout (2.0.1)."""
    shipped = (EXAMPLES_DIR / "tools" / "github_issues.yaml").read_text()
    assert "enum: [open, closed, all]" in shipped
    assert "timeout: 10" in shipped
    load(cli, tmp_path, shipped)
    narrowed = shipped.replace("enum: [open, closed, all]", "enum: [open, closed]")
    load(cli, tmp_path, narrowed)
    load(cli, tmp_path, narrowed.replace("timeout: 10", "timeout: 20"))
    return tmp_path


def test_the_list_shows_each_tools_current_version(cli, three_versions):
    out = cli("listtools").out
    (line,) = [line for line in out.splitlines() if line.startswith("github_issues ")]
    assert line.split()[:3] == ["github_issues", "http", "2.0.1"]
    data = {d["name"]: d for d in json.loads(cli("listtools", "--json").out)}
    assert data["github_issues"]["version"] == "2.0.1"


def test_a_tools_versions_newest_first_with_what_changed_in_each(cli, three_versions):
    lines = cli("listtools", "--versions", "github_issues").out.splitlines()

    heads = [line.split()[:2] for line in lines if not line.startswith("       ")]
    assert heads == [["3", "2.0.1"], ["2", "2.0.0"], ["1", "1.0.0"]]
    assert "(patch)" in lines[0]
    assert "(" not in lines[-1].split()[2]  # the first version was bumped from nothing
    assert "       major  input `state`: values removed: all" in lines
    assert "       patch  timeout: 10.0 → 20.0" in lines

    data = json.loads(cli("listtools", "--versions", "github_issues", "--json").out)
    assert [(d["number"], d["version"], d["bump"]) for d in data] == [
        (3, "2.0.1", "patch"),
        (2, "2.0.0", "major"),
        (1, "1.0.0", None),
    ]


def test_a_diff_between_two_versions_by_number_or_semantic_version(cli, three_versions):
    out = cli("listtools", "--diff", "github_issues", "1", "2.0.1").out
    lines = out.splitlines()

    assert lines[0] == "github_issues: 1 (1.0.0) → 3 (2.0.1): major"
    assert (
        "  major  input `state`: values removed: all  [input_schema.properties.state.enum]" in lines
    )
    assert "--- github_issues 1.0.0" in lines
    assert '-          "all"' in lines

    data = json.loads(cli("listtools", "--diff", "github_issues", "3", "2", "--json").out)
    assert (data["from"]["version"], data["to"]["version"], data["bump"]) == (
        "2.0.1",
        "2.0.0",
        "patch",
    )
    assert cli("listtools", "--diff", "github_issues", "2", "2").out.endswith(
        "the same definition\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--versions", "no_such_tool"), "tool `no_such_tool` has no recorded versions"),
        (
            ("--diff", "github_issues", "1", "7"),
            "has no version '7'; it has 3 (2.0.1), 2 (2.0.0), 1 (1.0.0)",
        ),
        (("--diff", "github_issues", "1", "9.9.9"), "has no version '9.9.9'"),
    ],
)
def test_an_unknown_tool_or_version_is_a_clear_error(cli, three_versions, args, message):
    result = cli("listtools", *args)
    assert result.code == 1
    assert message in result.err
