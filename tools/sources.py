"""Tool sources, read again on their own: MCP server files and OpenAPI documents.

A ``ToolSource`` is recorded when tools are first read from it — ``loadtools`` of an MCP
server file (``source_record_mcp``, with the name and version the server gave in its
``initialize`` handshake), ``importopenapi`` or the admin's OpenAPI import
(``source_record_openapi``, with the document's ``info.title`` and ``info.version``
and the import's choices, so it can be made again).

``tools.source_refresh`` reads them again, on a schedule and on demand.

A source that cannot be read (its server does not answer, its document or file is
gone) keeps its tools: they are marked unavailable (``Tool.available``: the planner
stops offering them) until a read works again, and the source records the error.

A source is **stale** when it was not read successfully for
``FLOWPILOT_SOURCE_STALE_HOURS`` (24): ``health`` fails its ``sources`` component, and
the review page and ``planflow`` warn that the catalog may be out of date.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from tools.models import Tool, ToolSource, ToolSourceKind


def refresh_hours(source: ToolSource) -> float:
    if source.refresh_hours is not None:
        return source.refresh_hours
    return float(settings.FLOWPILOT_SOURCE_REFRESH_HOURS)


def source_stale(source: ToolSource, *, now: datetime | None = None) -> bool:
    """Not read successfully for ``FLOWPILOT_SOURCE_STALE_HOURS`` (or never)."""
    now = now or timezone.now()
    limit = timedelta(hours=settings.FLOWPILOT_SOURCE_STALE_HOURS)
    return source.refreshed_at is None or now - source.refreshed_at > limit


def stale_sources(
    *, tools: Iterable[str] | None = None, now: datetime | None = None
) -> list[ToolSource]:
    """The sources that are stale or unavailable (of the named ``tools`` only, if given)."""
    wanted = None if tools is None else set(tools)
    found = []
    for source in ToolSource.objects.order_by("kind", "name", "location"):
        if wanted is not None and not wanted & set(source.tools or []):
            continue
        if source_stale(source, now=now) or not source.available:
            found.append(source)
    return found


def source_state(source: ToolSource, *, now: datetime | None = None) -> str:
    """In a few words: "ok", "stale: last read 2026-11-20 07:00 UTC", "unavailable: …"."""
    if not source.available:
        return f"unavailable: {source.error or 'the last refresh failed'}"
    if source_stale(source, now=now):
        when = source.refreshed_at.strftime("%Y-%m-%d %H:%M UTC") if source.refreshed_at else None
        return f"stale: last read {when}" if when else "stale: never read"
    return "ok"


# --- recording ---------------------------------------------------------------------------


def source_record_mcp(
    *, path: str | Path, server_name: str, info: dict[str, str], tools: Iterable[str]
) -> ToolSource:
    """An MCP server file was read: record (or update) it as a source."""
    return record_source(
        ToolSourceKind.MCP, str(path), server_name, {}, info, sorted(set(tools)), now=timezone.now()
    )


def source_record_openapi(
    *, location: str, options: dict[str, Any], info: dict[str, str], tools: Iterable[str]
) -> ToolSource:
    """An OpenAPI document was imported: record it with the import's ``options`` (out_dir,
    prefix, tags, operations, path_prefixes, strict), so a refresh imports it again."""
    name = str(options.get("prefix") or "openapi")
    return record_source(
        ToolSourceKind.OPENAPI,
        location,
        name,
        options,
        info,
        sorted(set(tools)),
        now=timezone.now(),
    )


def record_source(
    kind: str,
    location: str,
    name: str,
    options: dict[str, Any],
    info: dict[str, str],
    tools: list[str],
    *,
    now: datetime,
) -> ToolSource:
    source, _ = ToolSource.objects.update_or_create(
        location=location[:1000],
        defaults={
            "kind": kind,
            "name": name[:100],
            "options": options,
            "refreshed_at": now,
            "attempted_at": now,
            "error": "",
            "available": True,
            "reported_name": (info.get("name") or "")[:200],
            "reported_version": (info.get("version") or "")[:100],
            "tools": tools,
        },
    )
    Tool.objects.filter(name__in=tools, available=False).update(available=True)
    return source
