"""Tool lifecycle seen from workflows: the planner does not offer deprecated tools, the
validator warns on each use naming the replacement, and ``loadtools --prune`` removes
tools whose files are gone — refusing, or with ``--force`` warning, when an active
workflow uses them."""

from __future__ import annotations

import pytest

from tests.fakes.mcp_server import TOKEN, running_mcp_fake
from tests.fakes.openai_server import FakeLLM
from tests.workflows.test_planner import GOAL, VALID_PLAN, base_specs, generated_specs
from tools.llm import LLMClient
from tools.models import Tool
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.planner.catalog import offered_tools, select_tools
from workflows.planner.services import plan_create
from workflows.services import workflow_activate_trusted, workflow_import
from workflows.validator import validate_workflow

TOOL = """
name: {name}
description: Look a thing up.
base_url: https://api.example.test
request: {{url: "/things/{{{{id}}}}"}}
inputs: {{type: object, properties: {{id: {{type: string}}}}, required: [id]}}
response_extract: {{title: title}}
{extra}
"""


def deprecated(spec: ToolSpec, replacement: str | None = None) -> ToolSpec:
    return spec.model_copy(update={"deprecated": True, "replacement": replacement})


def registry_with_old_geocoder(extra=(), *, old_github: bool = False) -> ToolRegistry:
    specs = base_specs()
    old = deprecated(specs[0].model_copy(update={"name": "geocode_old"}), "geocode_city")
    if old_github:
        specs[2] = deprecated(specs[2])
    return ToolRegistry([*specs, old, *extra])


# --- the planner's catalog --------------------------------------------------------------


def test_the_catalog_leaves_out_deprecated_tools_small_registry():
    registry = registry_with_old_geocoder()

    assert "geocode_old" not in select_tools(registry, GOAL)
    assert select_tools(registry, GOAL) == offered_tools(registry) == [
        "geocode_city", "github_issues", "weather_forecast",
    ]  # fmt: skip


def test_the_catalog_leaves_out_deprecated_tools_large_registry_pinned_brings_the_successor():
    registry = registry_with_old_geocoder(generated_specs(300))

    named = select_tools(registry, "run geocode_old then the weather", limit=3)
    pinned = select_tools(registry, "weather", pinned=["geocode_old"], limit=1)

    assert "geocode_old" not in named + pinned
    assert "geocode_city" in named
    assert "geocode_city" in pinned


@pytest.mark.django_db
def test_a_planner_prompt_never_shows_a_deprecated_tool():
    registry = registry_with_old_geocoder()
    with FakeLLM() as llm, LLMClient(llm.base_url, "sk", "m", 5.0, 0) as client:
        llm.reply_json(VALID_PLAN)
        plan_create(goal=GOAL, sample_inputs={"city": "Oslo"}, registry=registry, client=client)
        (request,) = llm.requests
    catalog = request.messages[1]["content"]
    assert '"name":"geocode_city"' in catalog
    assert "geocode_old" not in catalog


# --- the validator ------------------------------------------------------------------------


def test_each_use_of_a_deprecated_tool_is_a_warning_naming_the_replacement():
    registry = registry_with_old_geocoder(old_github=True)
    data = {
        "name": "old_ways",
        "steps": [
            {"id": "a", "kind": "tool", "tool": "geocode_old", "input_mapping": {"city": "Oslo"}},
            {"id": "b", "kind": "tool", "tool": "geocode_old", "input_mapping": {"city": "Rome"}},
            {
                "id": "c",
                "kind": "tool",
                "tool": "github_issues",
                "input_mapping": {"owner": "o", "repo": "r"},
            },
        ],
    }

    report = validate_workflow(data, registry=registry)

    assert report.ok  # warnings only: a deprecated tool still runs
    assert [(i.code, i.path, i.message) for i in report.warnings] == [
        (
            "tool_deprecated",
            "steps[0].tool",
            "step `a` uses tool `geocode_old`, which is deprecated; use `geocode_city` instead",
        ),
        (
            "tool_deprecated",
            "steps[1].tool",
            "step `b` uses tool `geocode_old`, which is deprecated; use `geocode_city` instead",
        ),
        (
            "tool_deprecated",
            "steps[2].tool",
            "step `c` uses tool `github_issues`, which is deprecated; it has no replacement",
        ),
    ]


# --- loadtools --prune ---------------------------------------------------------------------


def write(directory, name: str, extra: str = ""):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(TOOL.format(name=name, extra=extra), encoding="utf-8")
    return path


def uses(tool: str, name: str = "uses_it"):
    step = {"id": "s", "kind": "tool", "tool": tool, "input_mapping": {"id": "1"}}
    workflow, _ = workflow_import(data={"name": name, "steps": [step]})
    return workflow_activate_trusted(workflow=workflow)


@pytest.mark.django_db
def test_prune_removes_the_tools_whose_files_are_gone(tmp_path, cli):
    tools, other = tmp_path / "tools", tmp_path / "other"
    write(tools, "kept")
    gone = write(tools, "gone")
    write(other, "elsewhere")
    assert cli("loadtools", str(tools), str(other), "--no-builtin").code == 0
    gone.unlink()

    result = cli("loadtools", str(tools), "--prune", "--no-builtin")

    assert result.code == 0, result.err
    assert f"removed tool `gone` (http): {gone} no longer defines it" in result.lines
    assert f"{tools}: 1 pruned, 0 kept" in result.lines
    assert sorted(Tool.objects.values_list("name", flat=True)) == ["elsewhere", "kept"]


@pytest.mark.django_db
def test_prune_refuses_a_tool_an_active_workflow_uses_naming_it(tmp_path, cli):
    gone = write(tmp_path, "gone")
    assert cli("loadtools", str(tmp_path), "--no-builtin").code == 0
    uses("gone", "daily_report")
    uses("gone", "weekly_report")
    gone.unlink()

    result = cli("loadtools", str(tmp_path), "--prune", "--no-builtin")

    assert result.code == 1
    assert (
        f"error kept tool `gone` (http): {gone} no longer defines it, but active workflows use "
        "it: `daily_report v1`, `weekly_report v1`; re-plan or edit them, or prune with --force "
        "to remove it anyway"
    ) in result.err
    assert "CommandError: 1 tool(s) not pruned: active workflows use them" in result.err
    assert Tool.objects.filter(name="gone").exists()


@pytest.mark.django_db
def test_prune_with_force_removes_it_with_a_warning(tmp_path, cli):
    gone = write(tmp_path, "gone")
    assert cli("loadtools", str(tmp_path), "--no-builtin").code == 0
    uses("gone", "daily_report")
    gone.unlink()

    result = cli("loadtools", str(tmp_path), "--prune", "--force", "--no-builtin")

    assert result.code == 0, result.err
    assert (
        f"warning removed tool `gone` (http): {gone} no longer defines it, although active "
        "workflows use it: `daily_report v1`"
    ) in result.err
    assert not Tool.objects.filter(name="gone").exists()


@pytest.mark.django_db
def test_prune_never_removes_the_tools_of_a_file_that_failed_to_load(tmp_path, cli):
    path = write(tmp_path, "fragile")
    assert cli("loadtools", str(tmp_path), "--no-builtin").code == 0
    path.write_text("name: fragile\nrequest: [unclosed", encoding="utf-8")

    result = cli("loadtools", str(tmp_path), "--prune", "--no-builtin")

    assert result.code == 1  # the broken file
    assert f"{tmp_path}: 0 pruned, 0 kept" in result.lines
    assert Tool.objects.filter(name="fragile").exists()


@pytest.mark.django_db
def test_prune_of_a_missing_directory_removes_nothing(tmp_path, cli):
    write(tmp_path, "kept")
    assert cli("loadtools", str(tmp_path), "--no-builtin").code == 0

    result = cli("loadtools", str(tmp_path / "nope"), "--prune", "--no-builtin")

    assert result.code == 1
    assert "no such file or directory" in result.err
    assert Tool.objects.filter(name="kept").exists()


@pytest.mark.django_db
def test_force_without_prune_is_refused(tmp_path, cli):
    result = cli("loadtools", str(tmp_path), "--force")
    assert result.code == 1
    assert "--force only applies with --prune" in result.err


@pytest.mark.django_db(transaction=True)
def test_prune_removes_the_tools_of_a_deleted_mcp_server_file(tmp_path, cli, monkeypatch):
    server_file = tmp_path / "fake.yaml"
    server_file.write_text(
        'mcp_server:\n  name: fake\n  url: "{{env.FAKE_MCP_URL}}"\n'
        '  headers: {X-Token: "{{env.FAKE_MCP_TOKEN}}"}\n  secret_headers: [X-Token]\n',
        encoding="utf-8",
    )
    with running_mcp_fake() as server:
        monkeypatch.setenv("FAKE_MCP_URL", server.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        assert cli("loadtools", str(tmp_path), "--no-builtin").code == 0
    assert Tool.objects.filter(kind="mcp").count() >= 2
    server_file.unlink()

    result = cli("loadtools", str(tmp_path), "--prune", "--no-builtin")

    assert result.code == 0, result.err
    assert "removed tool `fake_add` (mcp)" in result.out
    assert not Tool.objects.filter(kind="mcp").exists()
