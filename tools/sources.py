"""Tool sources, read again on their own: MCP server files and OpenAPI documents.

A ``ToolSource`` is recorded when tools are first read from it — ``loadtools`` of an MCP
server file (``source_record_mcp``, with the name and version the server gave in its
``initialize`` handshake), ``importopenapi`` or the admin's OpenAPI import
(``source_record_openapi``, with the document's ``info.title`` and ``info.version``
and the import's choices, so it can be made again).

``sources_refresh`` reads sources again: every source, the named ones, or (``due``)
those whose ``refresh_hours`` (``FLOWPILOT_SOURCE_REFRESH_HOURS``, 12) have passed since
the last try — beat runs that every ``FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES``
(``tools.refresh_sources``); ``refreshsources`` and the admin do it on demand. A read
goes through the same path as the first one (``tools_load_dir`` for an MCP server file;
the import again, files overwritten, then loaded, for a document), so its tools get
new versions when they changed (``tools.versions``) and an MCP server's tools it no
longer lists are removed.

A source that cannot be read (its server does not answer, its document or file is
gone) keeps its tools: they are marked unavailable (``Tool.available``: the planner
stops offering them) until a read works again, and the source records the error.

A source is **stale** when it was not read successfully for
``FLOWPILOT_SOURCE_STALE_HOURS`` (24): ``health`` fails its ``sources`` component, and
the review page and ``planflow`` warn that the catalog may be out of date.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from tools.errors import FlowpilotError
from tools.models import Tool, ToolSource, ToolSourceKind

logger = logging.getLogger("flowpilot.tools")


@dataclass(frozen=True)
class RefreshResult:
    """One source read again: whether it worked, and what happened to its tools."""

    source: ToolSource
    ok: bool
    message: str  # what was read ("3 tools: 1 updated, 2 unchanged") or why it failed
    changed: tuple[str, ...] = ()  # tools created, updated or removed


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
    return _record(
        ToolSourceKind.MCP, str(path), server_name, {}, info, sorted(set(tools)), now=timezone.now()
    )


def source_record_openapi(
    *, location: str, options: dict[str, Any], info: dict[str, str], tools: Iterable[str]
) -> ToolSource:
    """An OpenAPI document was imported: record it with the import's ``options`` (out_dir,
    prefix, tags, operations, path_prefixes, strict), so a refresh imports it again."""
    name = str(options.get("prefix") or "openapi")
    return _record(
        ToolSourceKind.OPENAPI,
        location,
        name,
        options,
        info,
        sorted(set(tools)),
        now=timezone.now(),
    )


def _record(
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


# --- refreshing --------------------------------------------------------------------------


def sources_due(*, now: datetime | None = None) -> list[ToolSource]:
    """The sources whose refresh interval has passed since their last try."""
    now = now or timezone.now()
    return [
        source
        for source in ToolSource.objects.order_by("kind", "name", "location")
        if source.attempted_at is None
        or now - source.attempted_at >= timedelta(hours=refresh_hours(source))
    ]


def sources_refresh(
    *, names: Iterable[str] | None = None, due: bool = False, now: datetime | None = None
) -> list[RefreshResult]:
    """Read sources again: the ``names``d ones (a source's name or location), those
    ``due``, or all. One that fails is recorded and the others go on."""
    now = now or timezone.now()
    sources = sources_due(now=now) if due else list(ToolSource.objects.order_by("kind", "name"))
    if names is not None:
        wanted = set(names)
        sources = [s for s in sources if s.name in wanted or s.location in wanted]
    return [source_refresh(source, now=now) for source in sources]


def source_refresh(source: ToolSource, *, now: datetime | None = None) -> RefreshResult:
    """Read one source again through its first path; on failure keep its tools, marked
    unavailable, and record why."""
    now = now or timezone.now()
    try:
        if source.kind == ToolSourceKind.MCP:
            changed, summary = _refresh_mcp(source)
        else:
            changed, summary = _refresh_openapi(source)
    except (FlowpilotError, OSError) as exc:
        message = _reason(exc)
        return _failed(source, message, now=now)
    source.refresh_from_db()
    logger.info("tool source %s refreshed: %s", source.location, summary)
    return RefreshResult(source, True, summary, changed)


def _reason(exc: Exception) -> str:
    if isinstance(exc, FlowpilotError):
        return exc.message
    if isinstance(exc, _SourceGone):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class _SourceGone(FileNotFoundError):
    """The server file a source names is not there any more."""


def _failed(source: ToolSource, message: str, *, now: datetime) -> RefreshResult:
    source.attempted_at, source.error, source.available = now, message[:2000], False
    source.save(update_fields=["attempted_at", "error", "available"])
    Tool.objects.filter(name__in=source.tools or []).update(available=False)
    logger.warning("tool source %s could not be read: %s", source.location, message)
    return RefreshResult(source, False, message)


def _refresh_mcp(source: ToolSource) -> tuple[tuple[str, ...], str]:
    from tools.services import tools_load_dir  # services record sources: no import cycle

    path = Path(source.location)
    if not path.is_file():
        raise _SourceGone(f"the MCP server file {path} is gone")
    report = tools_load_dir(directory=path, sync_builtin=False)
    if report.errors:
        raise _LoadFailed("; ".join(error.message for error in report.errors))
    return _summary(report.tools)


def _refresh_openapi(source: ToolSource) -> tuple[tuple[str, ...], str]:
    from tools.openapi.services import openapi_import  # the importer, on this path only
    from tools.services import tools_load_dir

    options = dict(source.options or {})
    out_dir = Path(str(options.get("out_dir") or ""))
    if not str(options.get("out_dir") or ""):
        raise _LoadFailed("the source records no output directory; import it again")
    report = openapi_import(
        source=source.location,
        out_dir=out_dir,
        prefix=str(options.get("prefix") or ""),
        tags=list(options.get("tags") or []),
        operations=list(options.get("operations") or []),
        path_prefixes=list(options.get("path_prefixes") or []),
        overwrite=True,
        strict=bool(options.get("strict")),
        record=False,
    )
    loaded = tools_load_dir(directory=out_dir, sync_builtin=False)
    if loaded.errors:
        raise _LoadFailed("; ".join(error.message for error in loaded.errors))
    names = sorted(t.name for t in loaded.tools if t.action != "removed")
    _record(
        ToolSourceKind.OPENAPI, source.location, source.name, options, report.info, names,
        now=timezone.now(),
    )  # fmt: skip
    return _summary(loaded.tools)


def _summary(loaded: Iterable[Any]) -> tuple[tuple[str, ...], str]:
    tools = list(loaded)
    changed = tuple(sorted(t.name for t in tools if t.action != "unchanged"))
    counts: dict[str, int] = {}
    for tool in tools:
        counts[tool.action] = counts.get(tool.action, 0) + 1
    parts = ", ".join(f"{n} {action}" for action, n in sorted(counts.items()))
    return changed, f"{len(tools)} tool(s): {parts or 'none'}"


class _LoadFailed(FlowpilotError):
    """What was read could not be loaded."""

    code = "tool_source_failed"
