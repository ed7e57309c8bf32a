"""Tool services (writes) and selectors (reads). Commands and admin call these.

``tools_load_dir`` upserts ``Tool`` rows from YAML files. The stored spec holds
templates only (``{{env.NAME}}`` references), never resolved secret values. One
bad file never stops the others: every error is collected in the report.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from tools.builtin import BuiltinProvider, load_providers
from tools.errors import FlowpilotError
from tools.loader import load_mcp_server_file, load_tool_file
from tools.mcp.config import McpServer
from tools.mcp.discovery import mcp_server_read
from tools.models import Tool
from tools.permissions import permission_require
from tools.pins import tool_current_versions, tool_revision_record, version_of
from tools.sources import source_record_mcp
from tools.spec import ToolSpec

logger = logging.getLogger("flowpilot.tools")

TOOL_FILE_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class LoadedTool:
    name: str
    kind: str
    action: str  # "created" | "updated" | "unchanged" | "removed" (an MCP server's)
    source: str


@dataclass(frozen=True)
class LoadError:
    """One file's problems; ``message`` names the file (one line per problem)."""

    source: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class LoadReport:
    """What a load did: one entry per tool, and every file error."""

    tools: list[LoadedTool] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)

    def _count(self, action: str) -> int:
        return sum(1 for t in self.tools if t.action == action)

    @property
    def created(self) -> int:
        return self._count("created")

    @property
    def updated(self) -> int:
        return self._count("updated")

    @property
    def unchanged(self) -> int:
        return self._count("unchanged")

    @property
    def ok(self) -> bool:
        return not self.errors


def tool_load_file(*, path: str | Path) -> list[ToolSpec]:
    """Parse one tool file (no database writes). Raises ``ToolConfigError``."""
    return load_tool_file(path)


def _tool_files(directory: Path) -> list[Path]:
    if directory.is_file():
        return [directory]
    return sorted(p for p in directory.rglob("*") if p.suffix in TOOL_FILE_SUFFIXES)


def tool_upsert(*, spec: ToolSpec, source: str) -> str:
    """Create or update the row for ``spec``; returns created/updated/unchanged.

    ``enabled`` is left as an operator set it on existing rows. Every new
    definition is also a row of the tool's history (``ToolRevision``). The row's
    ``refreshed_at`` records the read, changed or not.
    """
    values = {
        "kind": spec.kind,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "outputs": list(spec.outputs),
        "spec": spec.stored(),
        "source": source[:500],
        "deprecated": spec.deprecated,
        "replacement": spec.replacement or "",
    }
    now = timezone.now()
    with transaction.atomic():
        row = Tool.objects.select_for_update().filter(name=spec.name).first()
        tool_revision_record(spec=spec, source=source[:500])
        if row is None:
            Tool.objects.create(name=spec.name, refreshed_at=now, **values)
            return "created"
        # An UPDATE of this column alone leaves ``updated_at`` (the registry's cache key).
        Tool.objects.filter(pk=row.pk).update(refreshed_at=now)
        if all(getattr(row, k) == v for k, v in values.items()):
            return "unchanged"
        for key, value in values.items():
            setattr(row, key, value)
        row.save()
        return "updated"


def tools_load_dir(
    *,
    directory: str | Path,
    sync_builtin: bool = True,
    providers: Iterable[BuiltinProvider] | None = None,
) -> LoadReport:
    """Load every ``*.yaml``/``*.yml`` under ``directory`` (or one file) into ``Tool`` rows.

    With ``sync_builtin`` the built-in providers' tools (default: the setting)
    are upserted too, so admin and ``listtools`` show them. A file tool whose
    name is already taken — by a built-in tool or another file of this load —
    is an error for that file.
    """
    report = LoadReport()
    root = Path(directory)
    chosen = list(load_providers() if providers is None else providers)
    builtin = {s.name: (s, type(p)) for p in chosen for s in p.specs()}
    if not root.exists():
        report.errors.append(LoadError(str(root), f"{root}: no such file or directory"))
    files = _tool_files(root) if root.exists() else []
    seen: dict[str, str] = {}
    for path in files:
        _load_one(path, report, seen, builtin)
    if sync_builtin:
        for name in sorted(builtin):
            spec, cls = builtin[name]
            action = tool_upsert(spec=spec, source=f"{cls.__module__}.{cls.__qualname__}")
            report.tools.append(LoadedTool(name, spec.kind, action, cls.__qualname__))
    return report


def _load_one(
    path: Path, report: LoadReport, seen: dict[str, str], builtin: dict[str, Any]
) -> None:
    info: dict[str, str] = {}
    try:
        server = load_mcp_server_file(path)
        if server is not None:
            specs, info = mcp_server_read(server=server, env=os.environ)
        else:
            specs = load_tool_file(path)
    except FlowpilotError as exc:  # the file named, as a tool file's errors name it
        named = exc.message if str(path) in exc.message else f"{path}: {exc.message}"
        report.errors.append(LoadError(str(path), named))
        return
    clashes = [
        f"{path}: tool {s.name!r} is already defined by "
        + ("a built-in provider" if s.name in builtin else seen[s.name])
        for s in specs
        if s.name in builtin or s.name in seen
    ]
    if clashes:
        report.errors.append(LoadError(str(path), "\n".join(clashes)))
        return
    for spec in specs:
        seen[spec.name] = str(path)
        action = tool_upsert(spec=spec, source=str(path))
        report.tools.append(LoadedTool(spec.name, spec.kind, action, str(path)))
    if server is not None:
        kept = {spec.name for spec in specs}
        for name in mcp_server_tools_remove(server=server, keep=kept):
            report.tools.append(LoadedTool(name, "mcp", "removed", str(path)))
        # The server file is a source, read again on its own (tools.sources).
        source_record_mcp(path=path.resolve(), server_name=server.name, info=info, tools=kept)


def tool_prune_candidates(*, directory: str | Path, report: LoadReport) -> list[Tool]:
    """The stored http and MCP tools that came from under ``directory`` (a directory or
    one file) and that ``report`` — the load of that directory just made — did not
    find: their file is gone or no longer defines them. A file that failed to load
    still exists, so its tools are never candidates. By name.
    """
    root = Path(directory)
    if not root.exists():
        return []
    root = root.resolve()
    found = {t.name for t in report.tools if t.action != "removed"}
    broken = {Path(e.source).resolve() for e in report.errors}
    candidates = []
    for row in Tool.objects.filter(kind__in=["http", "mcp"]).exclude(source="").order_by("name"):
        source = Path(row.source).resolve()
        inside = source == root or source.is_relative_to(root)
        if inside and row.name not in found and source not in broken:
            candidates.append(row)
    return candidates


def tools_delete(*, names: Iterable[str]) -> int:
    """Delete the named tool rows (their history stays); returns how many."""
    deleted, _ = Tool.objects.filter(name__in=sorted(set(names))).delete()
    return deleted


def mcp_server_tools_remove(*, server: McpServer, keep: set[str]) -> list[str]:
    """Delete the rows of ``server``'s tools it no longer lists; returns their names.

    A refresh (``loadtools`` on the server file) thus records what was added
    (created), changed (updated) and removed; a workflow using a removed tool fails
    validation with ``unknown_tool``."""
    rows = Tool.objects.filter(kind="mcp", spec__mcp__server__name=server.name)
    gone = sorted(name for name in rows.values_list("name", flat=True) if name not in keep)
    Tool.objects.filter(name__in=gone).delete()
    return gone


def tools_set_enabled(*, tools: QuerySet[Tool], enabled: bool, actor: Any = None) -> int:
    """Enable or disable tools; returns how many rows changed.

    ``actor`` needs ``tools.change_tool`` (``tools.permissions``: None is an operator's
    command).
    """
    verb = "enable" if enabled else "disable"
    permission_require(actor=actor, permission="tools.change_tool", action=f"{verb} tools")
    # Stamped: a registry cached by the table's newest update must see the change.
    return tools.exclude(enabled=enabled).update(enabled=enabled, updated_at=timezone.now())


@dataclass(frozen=True)
class ToolEntry:
    """One line of ``listtools``: a tool as people see it."""

    name: str
    kind: str
    description: str
    inputs: list[str]  # required ones end with "*"
    outputs: list[str]
    enabled: bool
    deprecated: bool = False
    replacement: str = ""
    origin: str = ""  # the file, MCP server or built-in provider it came from
    refreshed_at: datetime | None = None  # when it was last loaded (None: never stored)
    version: str = ""  # its definition's version (tools.versions); "" when never recorded

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "enabled": self.enabled,
            "deprecated": self.deprecated,
            "replacement": self.replacement or None,
            "origin": self.origin,
            "refreshed_at": self.refreshed_at.isoformat() if self.refreshed_at else None,
            "version": self.version or None,
        }


def _entry(spec: ToolSpec, enabled: bool, row: Tool | None = None) -> ToolEntry:
    # Required ones in their declared order, then the rest by name: the same listing
    # whatever key order the database's JSON column hands back (jsonb reorders keys).
    required = set(spec.required_inputs)
    names = list(dict.fromkeys(spec.required_inputs))
    names += sorted(n for n in spec.input_schema.get("properties", {}) if n not in required)
    return ToolEntry(
        name=spec.name,
        kind=spec.kind,
        description=(spec.description.strip().splitlines() or [""])[0],
        inputs=[f"{n}*" if n in required else n for n in names],
        outputs=list(spec.outputs),
        enabled=enabled,
        deprecated=spec.deprecated,
        replacement=spec.replacement or "",
        origin=row.origin if row is not None else "",
        refreshed_at=row.refreshed_at if row is not None else None,
    )


def tool_entries(*, providers: Iterable[BuiltinProvider] | None = None) -> list[ToolEntry]:
    """Every stored tool (enabled or not) plus built-in tools not stored yet, by name."""
    entries: dict[str, ToolEntry] = {}
    current = tool_current_versions()
    for row in Tool.objects.order_by("name"):
        try:
            spec = ToolSpec.model_validate(row.spec)
        except ValueError as exc:
            logger.warning("tool %s has an invalid stored spec: %s", row.name, exc)
            continue
        revision = version_of(current, spec)
        entry = _entry(spec, row.enabled, row)
        entries[row.name] = replace(entry, version=revision.version if revision else "")
    for provider in load_providers() if providers is None else providers:
        for spec in provider.specs():
            entry = _entry(spec, True)
            where = f"built-in {type(provider).__module__}.{type(provider).__qualname__}"
            entries.setdefault(spec.name, replace(entry, origin=f"{where} (not stored)"))
    return [entries[name] for name in sorted(entries)]
