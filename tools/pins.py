"""Tool pins: the hash of a tool definition, its history and versions, and what changed.

A workflow version records, when it is approved, the hash of every tool it uses
(``tool_pins_for``). Before a run, ``tool_pin_changes`` compares those hashes with
the tools as they are now and says, per tool, what changed — parameters, URL, auth,
outputs — reading the approved definition from the tool's history
(:class:`~tools.models.ToolRevision`, a row per change). Each row is a numbered,
semantic version of the tool (``tools.versions`` computes the bump); ``tool_versions``,
``tool_version_get`` and ``tool_versions_diff`` read them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from tools.models import ToolRevision
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from tools.versions import (
    FIRST_VERSION,
    MAJOR,
    Change,
    bump_of,
    changes_between,
    definition_diff,
    next_version,
    value_at,
)

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
    """Add a history row when ``spec`` differs from the tool's latest one; its hash.

    The row is the tool's next version (``tools.versions``): numbered, with a semantic
    version bumped by what changed since the latest. Two processes recording the same
    tool at once cannot both take a number (a unique constraint): the loser reads the
    winner's row and records after it, if still different.
    """
    digest = tool_definition_hash(spec)
    stored = spec.stored()
    for _ in range(_RECORD_TRIES):
        latest = (
            ToolRevision.objects.filter(tool_name=spec.name)
            .order_by("-number", "-id")
            .only("hash", "number", "version", "spec")
            .first()
        )
        if latest is not None and latest.hash == digest:
            return digest
        fields = _version_fields(latest, stored)
        try:
            with transaction.atomic():
                ToolRevision.objects.create(
                    tool_name=spec.name, kind=spec.kind, hash=digest, spec=stored, source=source,
                    **fields,
                )  # fmt: skip
            return digest
        except IntegrityError:
            continue  # another process took the number: compare with its row
    raise IntegrityError(f"tool `{spec.name}`: no free version number after {_RECORD_TRIES} tries")


_RECORD_TRIES = 5


def _version_fields(latest: ToolRevision | None, stored: dict[str, Any]) -> dict[str, Any]:
    if latest is None:
        return {"number": 1, "version": FIRST_VERSION, "bump": "", "changes": []}
    changes = changes_between(latest.spec, stored)
    bump = bump_of(changes)
    return {
        "number": latest.number + 1,
        "version": next_version(latest.version, bump),
        "bump": bump,
        "changes": [change.as_dict() for change in changes],
    }


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
        if any(value_at(approved, path) != value_at(now, path) for path in paths)
    ]
    if not parts:
        return "its definition changed (other settings)"
    return "its " + ", ".join(parts) + " changed"


# --- versions of a tool ------------------------------------------------------------------


class VersionNotFound(LookupError):
    """A tool or version that the history does not have."""


@dataclass(frozen=True)
class VersionDiff:
    """Two versions of a tool compared: what changed from ``old`` to ``new`` and how much."""

    tool: str
    old: ToolRevision
    new: ToolRevision
    changes: list[Change]
    bump: str  # the biggest change: major, minor, patch ("" for the same definition)
    text: str  # the two definitions as a unified diff of their JSON

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "from": {"number": self.old.number, "version": self.old.version},
            "to": {"number": self.new.number, "version": self.new.version},
            "bump": self.bump,
            "changes": [change.as_dict() for change in self.changes],
            "diff": self.text,
        }


def tool_versions(*, name: str) -> list[ToolRevision]:
    """Every version of the tool ``name``, the newest first."""
    return list(ToolRevision.objects.filter(tool_name=name).order_by("-number", "-id"))


def tool_version_get(*, name: str, ref: str | int) -> ToolRevision:
    """One version of a tool, by number (``3``) or semantic version (``1.2.0``)."""
    rows = ToolRevision.objects.filter(tool_name=name)
    text = str(ref).strip()
    row = (
        rows.filter(number=int(text)).first()
        if text.isascii() and text.isdigit()
        else rows.filter(version=text.removeprefix("v")).order_by("-number").first()
    )
    if row is None:
        known = ", ".join(f"{r.number} ({r.version})" for r in tool_versions(name=name)[:10])
        if not known:
            raise VersionNotFound(f"tool `{name}` has no recorded versions")
        raise VersionNotFound(f"tool `{name}` has no version {text!r}; it has {known}")
    return row


def tool_versions_diff(*, name: str, old: str | int, new: str | int) -> VersionDiff:
    """What changed in the tool ``name`` from version ``old`` to ``new`` (numbers or
    semantic versions; either order: an older ``new`` shows the changes backwards)."""
    a, b = tool_version_get(name=name, ref=old), tool_version_get(name=name, ref=new)
    changes = changes_between(a.spec, b.spec)
    text = definition_diff(a.spec, b.spec, a=f"{name} {a.version}", b=f"{name} {b.version}")
    return VersionDiff(name, a, b, changes, bump_of(changes) if changes else "", text)


def tool_current_versions() -> dict[str, ToolRevision]:
    """Each tool's version whose definition it has now (by hash), by tool name: the
    newest revision of each (a definition that came back keeps its newest number)."""
    current: dict[str, ToolRevision] = {}
    for row in ToolRevision.objects.order_by("tool_name", "-number").only(
        "tool_name", "hash", "number", "version"
    ):
        current.setdefault(f"{row.tool_name}\0{row.hash}", row)
    return current


def tool_current_version(*, tool: Any) -> str | None:
    """The semantic version of the definition a stored ``Tool`` row has now."""
    try:
        spec = ToolSpec.model_validate(tool.spec)
    except ValueError:
        return None
    return (
        ToolRevision.objects.filter(tool_name=tool.name, hash=tool_definition_hash(spec))
        .order_by("-number")
        .values_list("version", flat=True)
        .first()
    )


def version_of(current: Mapping[str, ToolRevision], spec: ToolSpec) -> ToolRevision | None:
    """The revision of ``spec``'s definition in ``tool_current_versions()``' answer."""
    return current.get(f"{spec.name}\0{tool_definition_hash(spec)}")


@dataclass(frozen=True)
class PinnedVersion:
    """A tool as a workflow version pinned it, against the definition it has now."""

    current: str  # the version of the definition it has now ("" if never recorded)
    pinned: str  # the version the workflow was approved with ("" if it pins none)
    # "" (no pin, or the same definition), "compatible" (only minor or patch changes
    # since the pin: re-approving picks it up) or "breaking" (a major change since).
    newer: str = ""


def pinned_version(*, spec: ToolSpec, pinned_hash: str | None) -> PinnedVersion:
    """Where the tool ``spec`` (as it is now) stands against ``pinned_hash``."""
    rows = ToolRevision.objects.filter(tool_name=spec.name)
    current_hash = tool_definition_hash(spec)
    now = rows.filter(hash=current_hash).order_by("-number").first()
    if pinned_hash is None or pinned_hash == current_hash:
        version = now.version if now else ""
        return PinnedVersion(version, version if pinned_hash else "")
    then = rows.filter(hash=pinned_hash).order_by("-number").first()
    if now is None or then is None:
        return PinnedVersion(now.version if now else "", then.version if then else "", "breaking")
    changes = changes_between(then.spec, now.spec)
    newer = "breaking" if bump_of(changes) == MAJOR else "compatible"
    return PinnedVersion(now.version, then.version, newer)
