"""tools.source_refresh: sources read again on demand and when due, through the path
they were first read by; their tools kept, marked unavailable, when a source cannot be
read, and available again when it can.

The MCP server is the real SDK's server on loopback (``tests/fakes/mcp_server.py``); the
OpenAPI document is a file the test edits.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.fakes.mcp_server import TOKEN, running_mcp_fake
from tests.tools.test_sources import loaded
from tools.models import Tool, ToolRevision, ToolSource
from tools.registry import ToolRegistry
from tools.source_refresh import sources_refresh
from tools.sources import source_state
from workflows.planner.catalog import offered_tools, unavailable_tools

pytestmark = pytest.mark.django_db


def test_a_refresh_reads_the_server_again_and_versions_what_changed(mcp_fake, server_file):
    loaded(server_file)
    mcp_fake.change_schema()  # `evolving` gains a required input; `shout` is gone

    (result,) = sources_refresh()

    assert result.ok, result.message
    assert set(result.changed) == {"fake_evolving", "fake_shout"}
    assert "1 removed" in result.message
    assert not Tool.objects.filter(name="fake_shout").exists()
    newest = ToolRevision.objects.filter(tool_name="fake_evolving").order_by("-number").first()
    assert (newest.version, newest.bump) == ("2.0.0", "major")
    assert "fake_shout" not in ToolSource.objects.get().tools


def test_a_source_that_cannot_be_read_keeps_its_tools_marked_unavailable(server_file, monkeypatch):
    with running_mcp_fake() as server:
        monkeypatch.setenv("FAKE_MCP_URL", server.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        loaded(server_file)
    # The server is gone now.

    (result,) = sources_refresh()

    assert not result.ok
    source = ToolSource.objects.get()
    assert not source.available
    assert "fake" in source.error
    assert source_state(source).startswith("unavailable: ")
    tools = Tool.objects.filter(name__in=source.tools)
    assert tools.count() == len(source.tools) > 0  # kept
    assert not any(tools.values_list("available", flat=True))
    registry = ToolRegistry.from_db(providers=[])
    assert offered_tools(registry, unavailable_tools()) == []  # the planner stops offering them

    with running_mcp_fake() as server:  # it comes back
        monkeypatch.setenv("FAKE_MCP_URL", server.url)
        (again,) = sources_refresh()
    assert again.ok, again.message
    assert all(Tool.objects.filter(name__in=source.tools).values_list("available", flat=True))
    assert ToolSource.objects.get().available


def test_a_source_whose_file_is_gone_is_unavailable(mcp_fake, server_file):
    loaded(server_file)
    server_file.unlink()

    (result,) = sources_refresh(names=["fake"])

    assert not result.ok
    assert "is gone" in result.message


def test_due_sources_only_are_read_when_asked(mcp_fake, server_file):
    loaded(server_file)

    assert sources_refresh(due=True) == []
    ToolSource.objects.update(attempted_at=timezone.now() - timedelta(days=1))
    assert [r.ok for r in sources_refresh(due=True)] == [True]


# --- OpenAPI documents -----------------------------------------------------------------


def document(version: str, *, with_limit: bool = False) -> dict:
    parameters = [{"name": "q", "in": "query", "required": True, "schema": {"type": "string"}}]
    if with_limit:
        parameters.append({"name": "limit", "in": "query", "schema": {"type": "integer"}})
    return {
        "openapi": "3.1.0",
        "info": {"title": "Catalog API", "version": version},
        "servers": [{"url": "https://catalog.example.com"}],
        "paths": {
            "/items": {
                "get": {
                    "operationId": "searchItems",
                    "parameters": parameters,
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }


def test_an_imported_openapi_document_is_a_source_read_again_with_the_same_choices(cli, tmp_path):
    spec = tmp_path / "catalog.json"
    spec.write_text(json.dumps(document("1.4.0")), encoding="utf-8")
    out = tmp_path / "out"
    assert cli("importopenapi", str(spec), "--out", str(out), "--prefix", "cat").code == 0
    assert cli("loadtools", str(out), "--no-builtin").code == 0
    source = ToolSource.objects.get()
    assert (source.kind, source.name, source.location) == ("openapi", "cat", str(spec.resolve()))
    assert (source.reported_name, source.reported_version) == ("Catalog API", "1.4.0")
    assert source.options["out_dir"] == str(out.resolve())
    (tool,) = source.tools

    spec.write_text(json.dumps(document("1.5.0", with_limit=True)), encoding="utf-8")
    (out / "someone_elses.yaml").write_text("name: [broken", encoding="utf-8")  # not its file
    # Named as a path relative to here: sources store it absolute.
    (result,) = sources_refresh(names=[os.path.relpath(spec)])

    assert result.ok, result.message
    assert result.changed == (tool,)
    source.refresh_from_db()
    assert source.reported_version == "1.5.0"
    newest = ToolRevision.objects.filter(tool_name=tool).order_by("-number").first()
    assert (newest.version, newest.bump) == ("1.1.0", "minor")  # an optional input

    spec.unlink()
    (gone,) = sources_refresh()
    assert not gone.ok
    assert not Tool.objects.get(name=tool).available
