"""Tool pins: the hash of a tool definition, its history, and what changed.

A workflow version records, when it is approved, the hash of every tool it uses
(``tool_pins_for``). Before a run, ``tool_pin_changes`` compares those hashes with
the tools as they are now and says, per tool, what changed — parameters, URL, auth,
outputs — reading the approved definition from the tool's history
(:class:`~tools.models.ToolRevision`, a row per change).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from tools.models import ToolRevision
from tools.registry import ToolRegistry
from tools.spec import ToolSpec

# What a person reads for each part of a definition (first match wins).
_ASPECTS: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("parameters", (("input_schema",),)),
    ("URL", (("http", "base_url"), ("http", "request", "url"), ("http", "request", "method"),
             ("mcp", "server", "url"), ("mcp", "server", "command"), ("mcp", "server", "args"),
             ("mcp", "tool"))),
    ("auth", (("http", "auth"), ("http", "request", "secret_headers"),
              ("http", "request", "secret_query"), ("secret_env",), ("mcp", "server", "headers"),
              ("mcp", "server", "secret_headers"), ("mcp", "server", "env"))),
    ("outputs", (("outputs",), ("http", "response_extract"), ("output_types",))),
    ("worker queue", (("queue",),)),
    ("rate limit", (("rate_limit",),)),
)  # fmt: skip


# Fields added after tools were pinned: left out of the hash while unset.
_COUNTED_WHEN_SET = frozenset({"queue", "rate_limit", "output_types"})


def tool_definition_hash(spec: ToolSpec) -> str:
    """sha256 of the canonical JSON of the stored definition (keys sorted).

    The lifecycle (``deprecated``, ``replacement``; an MCP server file's ``deprecated``)
    is left out: deprecating a tool changes what it is offered for, not what a call
    does, so it never refuses the workflows approved with it. A field added since
    (``queue``, ``rate_limit``, ``output_types``) counts only when set, so the tools written
    before it keep their hash; a declared or changed output type is a change of the tool's
    outputs.
    """
    canonical = json.dumps(_without_lifecycle(spec.stored()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _without_lifecycle(stored: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in stored.items() if k not in ("deprecated", "replacement")}
    kept = {k: v for k, v in kept.items() if not (k in _COUNTED_WHEN_SET and v is None)}
    server = (kept.get("mcp") or {}).get("server")
    if isinstance(server, dict) and ("deprecated" in server or "queue" in server):
        # The server's queue is the tool's ``queue`` already (hashed there when set).
        server = {k: v for k, v in server.items() if k not in ("deprecated", "queue")}
        kept["mcp"] = {**kept["mcp"], "server": server}
    return kept


def tool_revision_record(*, spec: ToolSpec, source: str = "") -> str:
    """Add a history row when ``spec`` differs from the tool's latest one; its hash."""
    digest = tool_definition_hash(spec)
    latest = ToolRevision.objects.filter(tool_name=spec.name).order_by("-created_at", "-id")
    if latest.values_list("hash", flat=True).first() != digest:
        ToolRevision.objects.create(
            tool_name=spec.name, kind=spec.kind, hash=digest, spec=spec.stored(), source=source
        )
    return digest


def tool_pins_for(*, names: Iterable[str], registry: ToolRegistry) -> dict[str, str]:
    """The hash of each named tool the registry has (recorded in its history)."""
    pins: dict[str, str] = {}
    for name in sorted(set(names)):
        spec = registry.get(name)
        if spec is not None:
            pins[name] = tool_revision_record(spec=spec)
    return pins


def tool_pin_changes(*, pins: Mapping[str, str], registry: ToolRegistry) -> list[tuple[str, str]]:
    """``(tool, what changed)`` for every pinned tool whose definition is not the
    approved one any more, by tool name."""
    changes: list[tuple[str, str]] = []
    for name in sorted(pins):
        spec = registry.get(name)
        if spec is None:
            changes.append((name, "the tool was removed"))
            continue
        if tool_definition_hash(spec) == pins[name]:
            continue
        approved = (
            ToolRevision.objects.filter(tool_name=name, hash=pins[name])
            .order_by("-created_at", "-id")
            .values_list("spec", flat=True)
            .first()
        )
        changes.append((name, _what_changed(approved, spec.stored())))
    return changes


def _what_changed(approved: dict[str, Any] | None, now: dict[str, Any]) -> str:
    if approved is None:
        return "its definition changed"
    parts = [
        label
        for label, paths in _ASPECTS
        if any(_at(approved, path) != _at(now, path) for path in paths)
    ]
    if not parts:
        return "its definition changed (other settings)"
    return "its " + ", ".join(parts) + " changed"


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
