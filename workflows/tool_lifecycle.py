"""Pruning tools whose files are gone, without breaking the active workflows that use them.

``loadtools DIR --prune`` loads ``DIR`` and then removes the http and MCP tools that
came from under it but were not found: their file was deleted or no longer defines
them (``tools.services.tool_prune_candidates``). A tool an *active* workflow version
still uses is kept and reported, naming those versions — removing it would make them
fail validation with ``unknown_tool`` — unless ``force`` is given: then it is removed
with a warning naming them. This sits in ``workflows`` because only this layer knows
which workflows use a tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from tools.services import LoadReport, tool_prune_candidates, tools_delete
from workflows.models import Workflow, WorkflowStatus
from workflows.schema import WorkflowSpec


@dataclass(frozen=True)
class PrunedTool:
    name: str
    kind: str
    source: str
    used_by: tuple[str, ...] = ()  # the active versions using it ("daily_report v3")
    removed: bool = True

    def message(self) -> str:
        users = ", ".join(f"`{u}`" for u in self.used_by)
        gone = f"tool `{self.name}` ({self.kind}): {self.source} no longer defines it"
        if not self.used_by:
            return f"removed {gone}"
        if self.removed:
            return f"removed {gone}, although active workflows use it: {users}"
        return (
            f"kept {gone}, but active workflows use it: {users}; re-plan or edit them, or "
            "prune with --force to remove it anyway"
        )


@dataclass
class PruneReport:
    tools: list[PrunedTool] = field(default_factory=list)

    @property
    def refused(self) -> list[PrunedTool]:
        return [t for t in self.tools if not t.removed]


def active_tool_users(names: set[str]) -> dict[str, list[str]]:
    """``{tool: [active versions whose allowlist holds it]}`` for ``names``."""
    users: dict[str, list[str]] = {}
    for version in Workflow.objects.filter(status=WorkflowStatus.ACTIVE).order_by("name"):
        try:
            allowed = WorkflowSpec.model_validate(version.definition).allowlist()
        except ValidationError:
            continue  # a stored definition that no longer parses runs nothing
        for name in sorted(allowed & names):
            users.setdefault(name, []).append(str(version))
    return users


def tools_prune(*, directory: str | Path, report: LoadReport, force: bool = False) -> PruneReport:
    """Remove the tools from under ``directory`` that its load (``report``) did not
    find; keep those active workflows use unless ``force``."""
    candidates = tool_prune_candidates(directory=directory, report=report)
    users = active_tool_users({row.name for row in candidates})
    pruned = PruneReport()
    for row in candidates:
        used_by = tuple(users.get(row.name, ()))
        removed = force or not used_by
        pruned.tools.append(PrunedTool(row.name, row.kind, row.source, used_by, removed))
    tools_delete(names=[t.name for t in pruned.tools if t.removed])
    return pruned
