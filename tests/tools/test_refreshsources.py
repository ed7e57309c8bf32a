"""``refreshsources``: read tool sources again now, or list their state; exit 1 when one
could not be read (its tools are kept)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.tools.test_sources import loaded
from tools.models import ToolSource

pytestmark = pytest.mark.django_db


def test_list_shows_each_source_with_its_own_version_and_state(cli, mcp_fake, server_file):
    loaded(server_file)

    out = cli("refreshsources", "--list").out
    data = json.loads(cli("refreshsources", "--list", "--json").out)

    assert out.startswith(f"mcp fake ({server_file}) [fake 3.1.4]: ok; ")
    assert data[0]["reported_version"] == "3.1.4"
    assert data[0]["state"] == "ok"
    assert "fake_add" in data[0]["tools"]


def test_refresh_reads_again_and_says_what_changed(cli, mcp_fake, server_file):
    loaded(server_file)
    mcp_fake.change_schema()

    result = cli("refreshsources", "fake")

    assert result.code == 0, result.err
    assert f"mcp fake ({server_file}): " in result.out
    assert "1 removed" in result.out
    data = json.loads(cli("refreshsources", "--json").out)
    assert data[0]["ok"] is True


def test_a_source_that_cannot_be_read_exits_1_and_keeps_its_tools(cli, mcp_fake, server_file):
    loaded(server_file)
    server_file.unlink()

    result = cli("refreshsources")

    assert result.code == 1
    assert "1 source(s) could not be read; their tools are kept" in result.err
    assert "unavailable: " in cli("refreshsources", "--list").out


def test_due_only_and_unknown_names(cli, mcp_fake, server_file):
    loaded(server_file)

    assert cli("refreshsources", "--due").out.strip() == "No tool source is due."
    ToolSource.objects.update(attempted_at=timezone.now() - timedelta(days=1))
    assert cli("refreshsources", "--due").code == 0
    unknown = cli("refreshsources", "nope")
    assert unknown.code == 1
    assert "no tool source is named nope" in unknown.err
