"""What changed between two versions of a workflow (a pure function, no I/O).

``workflow_diff(old, new)`` compares two ``WorkflowSpec`` values: steps added,
removed and changed (per field: tool, each mapping key, retry, timeout, prompt,
conditions, …), edges added and removed (explicit and inferred from references,
the same edges the graph draws), tools added to or removed from the allowlist,
and the workflow-level fields (inputs, outputs, schedule, notifications, …).

Everything is ordered deterministically: steps in the new version's file order
with removed steps after them in the old version's order, field changes by path,
edges by (source, target, when), tools by name. A field set to its default reads
the same as a field left out: the comparison is on the full pydantic dump.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from workflows.graph import inferred_edges, merge_edges
from workflows.schema import WorkflowSpec

ChangeKind = Literal["added", "removed", "changed"]
ABSENT = "(absent)"

# Workflow-level fields compared as "workflow" changes (steps, edges, tools have their own).
_TOP_SKIP = frozenset({"name", "steps", "edges", "tools"})


@dataclass(frozen=True)
class FieldChange:
    """One value that differs: ``path`` is dotted (``input_mapping.city``, ``retry``)."""

    path: str
    old: Any = None
    new: Any = None
    old_present: bool = True
    new_present: bool = True

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path}
        if self.old_present:
            out["old"] = self.old
        if self.new_present:
            out["new"] = self.new
        return out


@dataclass(frozen=True)
class StepChange:
    step_id: str
    change: ChangeKind
    kind: str
    tool: str = ""
    fields: tuple[FieldChange, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "change": self.change,
            "kind": self.kind,
            "tool": self.tool,
            "fields": [f.as_dict() for f in self.fields],
        }


@dataclass(frozen=True)
class EdgeChange:
    source: str
    target: str
    when: str | None
    change: ChangeKind
    inferred: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.target,
            "when": self.when,
            "change": self.change,
            "inferred": self.inferred,
        }


@dataclass(frozen=True)
class WorkflowDiff:
    steps: tuple[StepChange, ...] = ()
    edges: tuple[EdgeChange, ...] = ()
    tools_added: tuple[str, ...] = ()
    tools_removed: tuple[str, ...] = ()
    fields: tuple[FieldChange, ...] = ()
    _by_id: dict[str, StepChange] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_id.update({s.step_id: s for s in self.steps})

    @property
    def is_empty(self) -> bool:
        return not (
            self.steps or self.edges or self.tools_added or self.tools_removed or self.fields
        )

    def step_status(self, step_id: str) -> str:
        """``added``, ``removed``, ``changed`` or ``unchanged``."""
        found = self._by_id.get(step_id)
        return found.change if found else "unchanged"

    def counts(self) -> dict[str, int]:
        return {c: sum(1 for s in self.steps if s.change == c) for c in _ORDER}

    def as_dict(self) -> dict[str, Any]:
        return {
            "steps": [s.as_dict() for s in self.steps],
            "edges": [e.as_dict() for e in self.edges],
            "tools": {"added": list(self.tools_added), "removed": list(self.tools_removed)},
            "workflow": [f.as_dict() for f in self.fields],
            "summary": self.counts(),
        }


_ORDER: tuple[ChangeKind, ...] = ("added", "removed", "changed")


def value_changes(old: Any, new: Any, prefix: str = "") -> list[FieldChange]:
    """Field changes between two JSON values; dicts are walked key by key (sorted)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[FieldChange] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old:
                out.append(FieldChange(path, new=new[key], old_present=False))
            elif key not in new:
                out.append(FieldChange(path, old=old[key], new_present=False))
            else:
                out.extend(value_changes(old[key], new[key], path))
        return out
    if old == new and type(old) is type(new):
        return []
    return [FieldChange(prefix or "(value)", old=old, new=new)]


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


def _step_tool(step: Any) -> str:
    return getattr(step, "tool", "") or ""


def _step_changes(old: WorkflowSpec, new: WorkflowSpec) -> tuple[StepChange, ...]:
    before = {s.id: s for s in old.steps}
    after = {s.id: s for s in new.steps}
    out: list[StepChange] = []
    for step in new.steps:
        previous = before.get(step.id)
        if previous is None:
            out.append(StepChange(step.id, "added", step.kind, _step_tool(step)))
            continue
        fields = value_changes(_dump(previous), _dump(step))
        fields = [f for f in fields if f.path != "id"]
        if fields:
            out.append(StepChange(step.id, "changed", step.kind, _step_tool(step), tuple(fields)))
    for step in old.steps:
        if step.id not in after:
            out.append(StepChange(step.id, "removed", step.kind, _step_tool(step)))
    return tuple(out)


def spec_edges(spec: WorkflowSpec) -> dict[tuple[str, str, str | None], bool]:
    """Every edge of a spec (explicit and inferred) → whether it is inferred only."""
    ids = {s.id for s in spec.steps}
    explicit = [(e.from_, e.to, e.when) for e in spec.edges]
    merged = merge_edges(explicit, inferred_edges(spec.steps, ids))
    return {(e.source, e.target, e.when): e.inferred for e in merged}


def _edge_changes(old: WorkflowSpec, new: WorkflowSpec) -> tuple[EdgeChange, ...]:
    before, after = spec_edges(old), spec_edges(new)
    out = [EdgeChange(*k, "added", after[k]) for k in after if k not in before]
    out += [EdgeChange(*k, "removed", before[k]) for k in before if k not in after]
    return tuple(sorted(out, key=lambda e: (e.source, e.target, e.when or "", e.change)))


def spec_tools(spec: WorkflowSpec) -> set[str]:
    """The allowlist, or (without one) every tool its steps name."""
    if spec.tools is not None:
        return set(spec.tools)
    return {t for s in spec.steps for t in (*s.direct_tools(), *s.model_tools())}


def workflow_diff(old: WorkflowSpec, new: WorkflowSpec) -> WorkflowDiff:
    """What ``new`` changes relative to ``old`` (see the module docstring for the order)."""
    old_top = {k: v for k, v in _dump(old).items() if k not in _TOP_SKIP}
    new_top = {k: v for k, v in _dump(new).items() if k not in _TOP_SKIP}
    tools_before, tools_after = spec_tools(old), spec_tools(new)
    return WorkflowDiff(
        steps=_step_changes(old, new),
        edges=_edge_changes(old, new),
        tools_added=tuple(sorted(tools_after - tools_before)),
        tools_removed=tuple(sorted(tools_before - tools_after)),
        fields=tuple(value_changes(old_top, new_top)),
    )


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:119] + "…"


def field_text(change: FieldChange) -> str:
    """``path: old → new`` with ``(absent)`` for a side that has no value."""
    old = _show(change.old) if change.old_present else ABSENT
    new = _show(change.new) if change.new_present else ABSENT
    return f"{change.path}: {old} → {new}"


_MARK = {"added": "+", "removed": "-", "changed": "~"}


def diff_lines(diff: WorkflowDiff, *, old_label: str, new_label: str) -> list[str]:
    """The diff as text lines (``exportflow --diff``)."""
    counts = diff.counts()
    lines = [
        f"diff {old_label} → {new_label}",
        f"steps: {counts['added']} added, {counts['removed']} removed, "
        f"{counts['changed']} changed",
    ]
    if diff.is_empty:
        return [*lines, "no changes"]
    for step in diff.steps:
        what = f"tool {step.tool}" if step.kind == "tool" else step.kind
        lines.append(f"{_MARK[step.change]} step {step.step_id} ({what})")
        lines += [f"    {field_text(f)}" for f in step.fields]
    for edge in diff.edges:
        when = f" [when {edge.when}]" if edge.when else ""
        how = " (inferred)" if edge.inferred else ""
        lines.append(f"{_MARK[edge.change]} edge {edge.source} → {edge.target}{when}{how}")
    lines += [f"+ tool {name}" for name in diff.tools_added]
    lines += [f"- tool {name}" for name in diff.tools_removed]
    lines += [f"~ workflow {field_text(f)}" for f in diff.fields]
    return lines
