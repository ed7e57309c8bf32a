"""Worker queue names (``tools/queues.py``) and the ``queue`` of a tool file: the rule,
the errors that name the field and the file, and the tool's hash."""

from __future__ import annotations

import hashlib
import json

import pytest

from tools.errors import ToolConfigError
from tools.loader import load_tool_text
from tools.pins import tool_definition_hash
from tools.queues import check_queue_name, queue_name_problem

TOOL = """
name: heavy_report
kind: http
description: A slow report.
base_url: https://api.example.test
request: {{method: GET, url: /report}}
{queue}
"""

LEGACY_TOOL = """
name: heavy_legacy
method: GET
url: https://api.example.test/report
{queue}
"""


@pytest.mark.parametrize(
    "name", ["heavy", "Heavy_1", "team-a.reports", "9lives", "q" * 64, "celery"]
)
def test_plain_names_are_queues(name):
    assert queue_name_problem(name) is None
    assert check_queue_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "1 to 64"),
        ("q" * 65, "1 to 64"),
        ("-heavy", "starting with a letter or digit"),
        (".heavy", "starting with a letter or digit"),
        ("heavy queue", "letters, digits"),
        ("heavy/queue", "letters, digits"),
        ("heavy\nqueue", "letters, digits"),
        ("h@host", "letters, digits"),
        ("celeryev.1234", "Celery's own"),
        ("celery.pidbox", "Celery's own"),
        ("w1@host.celery.pidbox".replace("@", "."), "Celery's own"),
        ("CeleryEv.x", "Celery's own"),
    ],
)
def test_other_names_are_refused_with_the_reason(name, why):
    problem = queue_name_problem(name)
    assert problem is not None
    assert why in problem
    assert repr(name) in problem
    with pytest.raises(ValueError, match="queue name"):
        check_queue_name(name)


def test_no_queue_is_no_queue():
    assert check_queue_name(None) is None


@pytest.mark.parametrize("template", [TOOL, LEGACY_TOOL])
def test_a_tool_file_names_its_queue_in_either_form(template):
    (spec,) = load_tool_text(template.format(queue="queue: heavy"), source="t.yaml")
    assert spec.queue == "heavy"
    (plain,) = load_tool_text(template.format(queue=""), source="t.yaml")
    assert plain.queue is None


@pytest.mark.parametrize("bad", ["'heavy queue'", "celeryev.x", "7", "[a, b]"])
def test_a_bad_queue_in_a_tool_file_names_the_field_and_the_file(bad):
    with pytest.raises(ToolConfigError) as info:
        load_tool_text(TOOL.format(queue=f"queue: {bad}"), source="tools/heavy.yaml")
    message = str(info.value)
    assert "tools/heavy.yaml" in message
    assert "heavy_report" in message
    assert "queue" in message


# What a tool's hash leaves out: its lifecycle, and the fields added after tools were
# first pinned while they are unset.
ADDED = ("deprecated", "replacement", "queue", "rate_limit")


def test_the_queue_is_part_of_the_tools_hash_only_when_set():
    (plain,) = load_tool_text(TOOL.format(queue=""), source="t.yaml")
    (heavy,) = load_tool_text(TOOL.format(queue="queue: heavy"), source="t.yaml")
    (other,) = load_tool_text(TOOL.format(queue="queue: other"), source="t.yaml")

    hashes = {tool_definition_hash(spec) for spec in (plain, heavy, other)}
    assert len(hashes) == 3  # moving a tool to another queue is a change approval sees
    # A tool written before the field keeps its hash: ``queue: null`` (and
    # ``rate_limit: null``, added with it) is not hashed, so the hash is the one computed
    # before the fields existed.
    stored = plain.stored()
    assert stored["queue"] is None
    assert stored["rate_limit"] is None
    before = {k: v for k, v in stored.items() if k not in ADDED}
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"))
    assert tool_definition_hash(plain) == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.django_db
def test_moving_a_pinned_tool_to_another_queue_is_a_change_named_as_such():
    from tools.pins import tool_pin_changes, tool_pins_for
    from tools.registry import ToolRegistry
    from tools.services import tool_upsert

    (plain,) = load_tool_text(TOOL.format(queue=""), source="t.yaml")
    tool_upsert(spec=plain, source="t.yaml")
    pins = tool_pins_for(names=["heavy_report"], registry=ToolRegistry.from_db())
    (heavy,) = load_tool_text(TOOL.format(queue="queue: heavy"), source="t.yaml")
    tool_upsert(spec=heavy, source="t.yaml")

    changes = tool_pin_changes(pins=pins, registry=ToolRegistry.from_db())

    assert changes == [("heavy_report", "its worker queue changed")]


def test_an_mcp_server_files_queue_is_every_one_of_its_tools_queue():
    from mcp import types

    from tools.mcp.config import McpServer
    from tools.mcp.discovery import _spec

    tool = types.Tool(name="lookup", inputSchema={"type": "object", "properties": {}})
    plain = _spec(McpServer(name="srv", url="http://127.0.0.1:9/mcp"), tool, "srv_lookup")
    routed = _spec(
        McpServer(name="srv", url="http://127.0.0.1:9/mcp", queue="heavy"), tool, "srv_lookup"
    )

    assert (plain.queue, routed.queue) == (None, "heavy")
    assert tool_definition_hash(plain) != tool_definition_hash(routed)
    # The hash of an MCP tool written before the field: neither `queue` is hashed unset.
    stored = plain.stored()
    server = {k: v for k, v in stored["mcp"]["server"].items() if k not in ("deprecated", "queue")}
    before = {
        **{k: v for k, v in stored.items() if k not in ADDED},
        "mcp": {**stored["mcp"], "server": server},
    }
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"))
    assert tool_definition_hash(plain) == hashlib.sha256(canonical.encode()).hexdigest()


def test_a_bad_queue_in_an_mcp_server_file_names_the_field(tmp_path):
    from tools.loader import load_mcp_server_file

    path = tmp_path / "srv.yaml"
    path.write_text("mcp_server:\n  name: srv\n  url: http://127.0.0.1:9/mcp\n  queue: 'a b'\n")
    with pytest.raises(ToolConfigError) as info:
        load_mcp_server_file(path)
    message = str(info.value)
    assert str(path) in message
    assert "mcp_server.queue" in message
    assert "queue name 'a b' must be" in message
