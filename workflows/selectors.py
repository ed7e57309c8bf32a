"""Workflow selectors (reads)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet

from workflows.errors import WorkflowNotActive, WorkflowNotFound
from workflows.models import Step, Workflow, WorkflowStatus

if TYPE_CHECKING:  # the schema, validator and tool registry load with a diff, not a list
    from workflows.diff import WorkflowDiff


def workflow_list() -> QuerySet[Workflow]:
    return Workflow.objects.order_by("name", "-version")


def workflow_get_runnable(*, name: str, version: int | None = None) -> Workflow:
    """The version a trigger runs: the given one, else the newest active one.

    Raises ``WorkflowNotFound`` with a message that says what exists instead:
    ``WorkflowNotActive`` (naming the version and its state) when the workflow exists
    but the version asked for, or every version, is not active.
    """
    versions = Workflow.objects.filter(name=name).order_by("-version")
    latest = versions.first()
    if latest is None:
        raise WorkflowNotFound(f"no stored workflow named `{name}`")
    if version is not None:
        found = versions.filter(version=version).first()
        if found is None:
            have = ", ".join(f"v{v}" for v in versions.values_list("version", flat=True)[:10])
            raise WorkflowNotFound(f"workflow `{name}` has no v{version} (has {have})")
        if found.status != WorkflowStatus.ACTIVE:
            raise WorkflowNotActive(
                f"workflow `{name}` v{version} is {found.status}, not active; only approved "
                "versions run by name (run the file directly while you work on it)",
                workflow=name,
                version=found.version,
                status=found.status,
            )
        return found
    active = versions.filter(status=WorkflowStatus.ACTIVE).first()
    if active is None:
        raise WorkflowNotActive(
            f"workflow `{name}` has no active version (newest is v{latest.version}, "
            f"{latest.status}): v{latest.version} is {latest.status}, not active; approve "
            "it, or run the file directly",
            workflow=name,
            version=latest.version,
            status=latest.status,
        )
    return active


def workflow_diff_base(*, version: Workflow) -> Workflow | None:
    """The version a revision is reviewed against: the active version of the same name
    when it is an earlier one (what the revision would replace), else the newest
    earlier version (the one it revises); ``None`` for a first version."""
    earlier = Workflow.objects.filter(name=version.name, version__lt=version.version)
    active = earlier.filter(status=WorkflowStatus.ACTIVE).order_by("-version").first()
    return active or earlier.order_by("-version").first()


def workflow_version_diff(*, old: Workflow, new: Workflow) -> WorkflowDiff:
    """The diff of two stored versions (their frozen definitions)."""
    from workflows.diff import workflow_diff
    from workflows.services import workflow_spec

    return workflow_diff(workflow_spec(old), workflow_spec(new))


def _loop_data(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    """What the picture shows of a `loop` step: the workflow it repeats, its bound, its
    condition (a loop node is drawn apart, with its bound)."""
    if kind != "loop":
        return {}
    return {
        "loop": {
            "workflow": config.get("workflow", ""),
            "max_iterations": config.get("max_iterations"),
            "until": config.get("until", ""),
        }
    }


def workflow_graph_data(
    workflow: Workflow, *, steps: Iterable[Step] | None = None
) -> dict[str, Any]:
    """Nodes and edges for the picture of a version's graph.

    Embedded with ``json_script`` and drawn by ``workflows/static/workflows/graph.js``
    on the review page and, with each node's status added, on the run page.
    ``steps``: the version's steps in position order, when the caller read them already.
    """
    nodes = []
    for step in workflow.steps.order_by("position") if steps is None else steps:
        config = step.config or {}
        nodes.append(
            {
                "id": step.step_id,
                "kind": step.kind,
                "tool": step.tool,
                "name": config.get("name", ""),
                "description": config.get("description", ""),
                "branches": list(config.get("branches", [])),
                **_loop_data(step.kind, config),
            }
        )
    edges = [
        {"from": e.from_step, "to": e.to_step, "when": e.when, "inferred": e.inferred}
        for e in workflow.edges.order_by("from_step", "to_step", "when")
    ]
    return {"name": workflow.name, "version": workflow.version, "nodes": nodes, "edges": edges}
