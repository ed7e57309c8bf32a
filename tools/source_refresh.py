"""Reading tool sources again (``tools.sources`` records them and says which are stale).

``sources_refresh`` reads sources again: every source, the named ones (name or
location), or (``due``) those whose ``refresh_hours`` (``FLOWPILOT_SOURCE_REFRESH_HOURS``,
12) have passed since the last try — beat runs that every
``FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES`` (``tools.refresh_sources``);
``refreshsources`` and the admin do it on demand. A read goes through the same path as
the first one (``tools_load_dir`` for an MCP server file; the import again, files
overwritten, then loaded, for a document), so its tools get new versions when they
changed (``tools.versions``) and an MCP server's tools it no longer lists are removed.
A source that cannot be read keeps its tools, marked unavailable, and records why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.utils import timezone

from tools.errors import FlowpilotError
from tools.models import Tool, ToolSource, ToolSourceKind
from tools.openapi.services import openapi_import
from tools.services import tools_load_dir
from tools.sources import record_source, refresh_hours

logger = logging.getLogger("flowpilot.tools")


@dataclass(frozen=True)
class RefreshResult:
    """One source read again: whether it worked, and what happened to its tools."""

    source: ToolSource
    ok: bool
    message: str  # what was read ("3 tools: 1 updated, 2 unchanged") or why it failed
    changed: tuple[str, ...] = ()  # tools created, updated or removed


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
        wanted = set(names) | {_resolved(name) for name in names}
        sources = [s for s in sources if s.name in wanted or s.location in wanted]
    return [source_refresh(source, now=now) for source in sources]


def _resolved(name: str) -> str:
    """A file's location as sources store it (absolute); a URL or a name as given."""
    if "://" in name:
        return name
    return str(Path(name).resolve())


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
    return exc.message if isinstance(exc, FlowpilotError) else f"{type(exc).__name__}: {exc}"


def _failed(source: ToolSource, message: str, *, now: datetime) -> RefreshResult:
    source.attempted_at, source.error, source.available = now, message[:2000], False
    source.save(update_fields=["attempted_at", "error", "available"])
    Tool.objects.filter(name__in=source.tools or []).update(available=False)
    logger.warning("tool source %s could not be read: %s", source.location, message)
    return RefreshResult(source, False, message)


def _refresh_mcp(source: ToolSource) -> tuple[tuple[str, ...], str]:
    path = Path(source.location)
    if not path.is_file():
        raise _LoadFailed(f"the MCP server file {path} is gone")
    report = tools_load_dir(directory=path, sync_builtin=False)
    if report.errors:
        raise _LoadFailed("; ".join(error.message for error in report.errors))
    return _summary(report.tools)


def _refresh_openapi(source: ToolSource) -> tuple[tuple[str, ...], str]:
    options = dict(source.options or {})
    if not options.get("out_dir"):
        raise _LoadFailed("the source records no output directory; import it again")
    report = openapi_import(
        source=source.location,
        out_dir=Path(str(options["out_dir"])),
        prefix=str(options.get("prefix") or ""),
        tags=list(options.get("tags") or []),
        operations=list(options.get("operations") or []),
        path_prefixes=list(options.get("path_prefixes") or []),
        overwrite=True,
        strict=bool(options.get("strict")),
        record=False,
    )
    # Only the files this import wrote: the directory may hold other tools' files.
    loaded: list[Any] = []
    for path in report.written:
        done = tools_load_dir(directory=path, sync_builtin=False)
        if done.errors:
            raise _LoadFailed("; ".join(error.message for error in done.errors))
        loaded += done.tools
    record_source(
        ToolSourceKind.OPENAPI, source.location, source.name, options, report.info,
        report.tools, now=timezone.now(),
    )  # fmt: skip
    return _summary(loaded)


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
