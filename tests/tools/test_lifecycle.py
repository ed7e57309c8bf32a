"""Tool lifecycle: `deprecated` (with a `replacement`) from tool files, built-in providers
and MCP server files; where each tool came from and when it was last refreshed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.mcp_server import TOKEN, running_mcp_fake
from tools.builtin.base import BuiltinProvider, BuiltinTool
from tools.models import Tool
from tools.pins import tool_definition_hash
from tools.services import tool_entries, tools_load_dir
from tools.spec import ToolSpec

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = """
name: {name}
description: Old lookup.
base_url: https://api.example.test
request: {{url: "/things/{{{{id}}}}"}}
inputs: {{type: object, properties: {{id: {{type: string}}}}, required: [id]}}
response_extract: {{title: title}}
{extra}
"""


def write(directory: Path, name: str, extra: str = "", file: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (file or f"{name}.yaml")
    path.write_text(TOOL.format(name=name, extra=extra), encoding="utf-8")
    return path


def load(directory: Path):
    return tools_load_dir(directory=directory, sync_builtin=False)


class OldProvider(BuiltinProvider):
    tools = (
        BuiltinTool("old_sum", "Adds (use new_sum).", {"type": "object"}, "run", (),
                    deprecated=True, replacement="new_sum"),
        BuiltinTool("new_sum", "Adds.", {"type": "object"}, "run"),
    )  # fmt: skip

    def run(self, arguments, ctx):
        return {}


def test_a_tool_file_deprecates_a_tool_with_its_replacement(tmp_path):
    write(tmp_path, "lookup", "deprecated: true\nreplacement: lookup_v2")
    write(tmp_path, "lookup_v2")

    report = load(tmp_path)

    assert report.ok, report.errors
    row = Tool.objects.get(name="lookup")
    assert (row.deprecated, row.replacement) == (True, "lookup_v2")
    assert (Tool.objects.get(name="lookup_v2").deprecated, row.spec["replacement"]) == (
        False,
        "lookup_v2",
    )


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("replacement: lookup_v2", "`replacement` is only for a deprecated tool"),
        ("deprecated: true\nreplacement: lookup", "cannot be its own replacement"),
        ("deprecated: true\nreplacement: 'a.b'", "should match pattern"),
        ("deprecated: 'yes please'", "deprecated"),
        ("deprecated: true\nreplacement: [x]", "replacement"),
    ],
)
def test_hostile_lifecycle_keys_are_refused_naming_the_file(tmp_path, extra, problem):
    path = write(tmp_path, "lookup", extra)

    report = load(tmp_path)

    [error] = report.errors
    assert str(path) in error.message
    assert problem in error.message
    assert not Tool.objects.exists()


def test_deprecating_a_tool_keeps_its_pin_hash(tmp_path):
    """Deprecation changes what the planner offers, not what a call does: the workflows
    approved with the tool keep running."""
    write(tmp_path, "lookup")
    load(tmp_path)
    before = tool_definition_hash(ToolSpec.model_validate(Tool.objects.get().spec))

    write(tmp_path, "lookup", "deprecated: true")
    report = load(tmp_path)

    assert [t.action for t in report.tools] == ["updated"]
    spec = ToolSpec.model_validate(Tool.objects.get().spec)
    assert spec.deprecated
    assert tool_definition_hash(spec) == before


def test_refreshed_at_moves_on_every_load_updated_at_only_on_a_change(tmp_path):
    write(tmp_path, "lookup")
    load(tmp_path)
    first = Tool.objects.get()

    load(tmp_path)  # unchanged

    again = Tool.objects.get()
    assert again.refreshed_at > first.refreshed_at
    assert again.updated_at == first.updated_at  # the registry's cache key is untouched


def test_listtools_shows_lifecycle_origin_and_refresh_time(tmp_path, cli, settings):
    settings.FLOWPILOT_BUILTIN_PROVIDERS = ["tests.tools.test_lifecycle.OldProvider"]
    path = write(tmp_path, "lookup", "deprecated: true")
    assert cli("loadtools", str(tmp_path)).code == 0

    out = cli("listtools").out

    lines = out.splitlines()
    assert lines[0].split() == [
        "NAME", "KIND", "VERSION", "INPUTS", "OUTPUTS", "ORIGIN", "REFRESHED", "DESCRIPTION",
    ]  # fmt: skip
    lookup = next(line for line in lines if line.startswith("lookup"))
    assert lookup.startswith("lookup (deprecated)")
    assert f"file {path}" in lookup
    stamp = Tool.objects.get(name="lookup").refreshed_at.strftime("%Y-%m-%d %H:%M")
    assert stamp in lookup
    old = next(line for line in lines if line.startswith("old_sum"))
    assert old.startswith("old_sum (deprecated → new_sum)")
    assert "built-in tests.tools.test_lifecycle.OldProvider" in old

    data = {d["name"]: d for d in json.loads(cli("listtools", "--json").out)}
    assert data["old_sum"]["deprecated"] is True
    assert data["old_sum"]["replacement"] == "new_sum"
    assert data["new_sum"]["replacement"] is None
    assert data["lookup"]["origin"] == f"file {path}"
    assert data["lookup"]["refreshed_at"].startswith(stamp.replace(" ", "T"))


def test_a_builtin_tool_not_stored_yet_says_so(settings):
    [new, old] = sorted(
        (e for e in tool_entries(providers=[OldProvider()]) if e.name.endswith("_sum")),
        key=lambda e: e.name,
    )
    assert (new.name, new.deprecated, new.refreshed_at) == ("new_sum", False, None)
    assert (old.deprecated, old.replacement) == (True, "new_sum")
    assert old.origin == "built-in tests.tools.test_lifecycle.OldProvider (not stored)"


MCP_SERVER = """
mcp_server:
  name: fake
  url: "{{{{env.FAKE_MCP_URL}}}}"
  headers: {{X-Token: "{{{{env.FAKE_MCP_TOKEN}}}}"}}
  secret_headers: [X-Token]
  timeout: 5
  deprecated: {deprecated}
"""


def test_an_mcp_server_file_deprecates_its_tools(tmp_path, monkeypatch):
    with running_mcp_fake() as server:
        monkeypatch.setenv("FAKE_MCP_URL", server.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        path = tmp_path / "fake.yaml"
        path.write_text(MCP_SERVER.format(deprecated="{shout: fake_add}"), encoding="utf-8")
        report = load(tmp_path)

    assert report.ok, report.errors
    shout = Tool.objects.get(name="fake_shout")
    assert (shout.deprecated, shout.replacement) == (True, "fake_add")
    assert shout.origin == f"MCP server fake ({path})"
    assert not Tool.objects.get(name="fake_add").deprecated


@pytest.mark.parametrize(
    ("deprecated", "problem"),
    [
        ("{whisper: null}", "`deprecated` names tool 'whisper', which the server does not list"),
        ("{shout: 'not a name'}", "replacement 'not a name' of 'shout' is not a tool name"),
        ("[shout]", "deprecated"),
    ],
)
def test_hostile_mcp_deprecations_are_refused(tmp_path, monkeypatch, deprecated, problem):
    with running_mcp_fake() as server:
        monkeypatch.setenv("FAKE_MCP_URL", server.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        (tmp_path / "fake.yaml").write_text(
            MCP_SERVER.format(deprecated=deprecated), encoding="utf-8"
        )
        report = load(tmp_path)

    [error] = report.errors
    assert problem in error.message
    assert not Tool.objects.filter(kind="mcp").exists()


def test_the_tool_admin_lists_lifecycle_origin_and_refresh(tmp_path, admin_client):
    path = write(tmp_path, "lookup", "deprecated: true\nreplacement: lookup_v2")
    write(tmp_path, "lookup_v2")
    load(tmp_path)

    page = admin_client.get("/admin/tools/tool/").content.decode()
    filtered = admin_client.get("/admin/tools/tool/?deprecated__exact=1").content.decode()

    assert "deprecated → lookup_v2" in page
    assert f"file {path}" in page
    assert "current" in page
    assert "lookup_v2</a>" not in filtered  # the filter keeps only deprecated tools
    assert "lookup</a>" in filtered
