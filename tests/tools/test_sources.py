"""tools.sources: an MCP server file is recorded as a source when first read, with what
the server says of itself; a source is stale once not read for
FLOWPILOT_SOURCE_STALE_HOURS, and due once its refresh interval passed. Reading sources
again is in test_source_refresh.py.

The MCP server is the real SDK's server on loopback (``tests/fakes/mcp_server.py``).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from tools.models import ToolSource
from tools.services import tools_load_dir
from tools.source_refresh import sources_due
from tools.sources import source_stale, source_state, stale_sources

pytestmark = pytest.mark.django_db


def loaded(server_file: Path) -> ToolSource:
    report = tools_load_dir(directory=server_file.parent, sync_builtin=False)
    assert report.ok, report.errors
    return ToolSource.objects.get()


def test_loading_an_mcp_server_file_records_it_as_a_source_with_its_own_name_and_version(
    mcp_fake, server_file
):
    source = loaded(server_file)

    assert (source.kind, source.name, source.location) == ("mcp", "fake", str(server_file))
    assert source.reported_name == "fake"  # what the server said in its handshake
    assert source.reported_version == "3.1.4"
    assert "fake_add" in source.tools
    assert source.available
    assert source_state(source) == "ok"


def test_stale_after_the_threshold_and_due_after_the_interval(mcp_fake, server_file, settings):
    settings.FLOWPILOT_SOURCE_STALE_HOURS = 24
    settings.FLOWPILOT_SOURCE_REFRESH_HOURS = 12
    source = loaded(server_file)
    now = timezone.now()
    assert not source_stale(source, now=now)
    assert sources_due(now=now) == []
    assert sources_due(now=now + timedelta(hours=12, seconds=1)) == [source]

    later = now + timedelta(hours=25)
    assert source_stale(source, now=later)
    assert source_state(source, now=later).startswith("stale: last read ")
    assert stale_sources(now=later) == [source]
    assert stale_sources(tools=["fake_add"], now=later) == [source]
    assert stale_sources(tools=["csv_read"], now=later) == []
    source.refresh_hours = 1  # its own interval
    source.save()
    assert sources_due(now=now + timedelta(hours=1, seconds=1)) == [source]
