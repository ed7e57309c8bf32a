"""Workflow services (writes): import a definition as a version, change lifecycle state.

A version's ``definition`` is the file form of the validated pydantic model; runs
read only that frozen JSON. Step and Edge rows mirror it for the admin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import ValidationError

from tools.hooks import hooks_announce
from tools.permissions import actor_user, permission_require
from tools.registry import ToolRegistry
from workflows.errors import WorkflowError, WorkflowTransitionError
from workflows.graph import GraphCycleError, build_graph
from workflows.models import (
    FROZEN_STATUSES,
    WORKFLOW_TRANSITIONS,
    Edge,
    Step,
    TemplateUse,
    Workflow,
    WorkflowStatus,
)
from workflows.schema import WorkflowSpec
from workflows.schema_triggers import ScheduleSpec
from workflows.validator import validate_workflow

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tools.permissions import Actor


def workflow_parse(data: Mapping[str, Any] | WorkflowSpec) -> WorkflowSpec:
    """Schema-check a definition. Cross-element checks are the validator's job."""
    if isinstance(data, WorkflowSpec):
        return data
    try:
        return WorkflowSpec.model_validate(dict(data))
    except ValidationError as exc:
        report = validate_workflow(dict(data), registry=None)
        lines = "; ".join(f"{i.path}: {i.message}" for i in report.errors) or str(exc)
        raise WorkflowError(f"workflow definition is invalid: {lines}") from exc


def workflow_spec(workflow: Workflow) -> WorkflowSpec:
    """The frozen definition of a version as a model.

    Raises ``WorkflowError`` when the stored JSON no longer fits the format (edited by
    hand, or written by an older release), naming the version and the first problems.
    """
    try:
        return WorkflowSpec.model_validate(workflow.definition)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise WorkflowError(
            f"the stored definition of `{workflow}` does not fit the workflow format: {problems}"
        ) from exc


@transaction.atomic
def workflow_import(
    *,
    data: Mapping[str, Any] | WorkflowSpec,
    owner: User | None = None,
    status: str = WorkflowStatus.DRAFT,
) -> tuple[Workflow, bool]:
    """Store a definition as the next version of its name.

    Returns ``(workflow, created)``. When the newest version already holds the same
    definition (same hash) that version is returned unchanged, so importing a file
    twice never makes a new version.
    """
    spec = workflow_parse(data)
    seen: set[str] = set()
    for step in spec.steps:
        if step.id in seen:
            raise WorkflowError(f"workflow `{spec.name}` has a duplicate step id `{step.id}`")
        seen.add(step.id)
    digest = spec.definition_hash()
    latest = (
        Workflow.objects.select_for_update().filter(name=spec.name).order_by("-version").first()
    )
    if latest is not None and latest.definition_hash == digest:
        return latest, False
    version = (latest.version + 1) if latest else 1
    try:
        workflow = Workflow.objects.create(
            name=spec.name,
            version=version,
            status=status,
            description=spec.description,
            goal=spec.goal,
            inputs={
                k: v.model_dump(mode="json", exclude_unset=True) for k, v in spec.inputs.items()
            },
            tools=spec.allowed_tools(),
            outputs=spec.outputs,
            schedule=_cron(spec.declared_schedule()),
            notifications=spec.notifications.model_dump(mode="json"),
            definition=spec.to_data(),
            definition_hash=digest,
            owner=owner,
        )
    except IntegrityError as exc:  # a concurrent import took this version number
        raise WorkflowError(f"workflow `{spec.name}` v{version} was created concurrently") from exc
    _write_rows(workflow, spec)
    if spec.tests:  # its test scenarios run against recorded calls (runs.scenarios)
        hooks_announce(setting="FLOWPILOT_VERSION_STORED_HOOKS", workflow_id=workflow.pk)
    return workflow, True


def _write_rows(workflow: Workflow, spec: WorkflowSpec) -> None:
    step_data = spec.to_data()["steps"]
    Step.objects.bulk_create(
        Step(
            workflow=workflow,
            step_id=step.id,
            kind=step.kind,
            tool=getattr(step, "tool", "") or "",
            position=index,
            input_mapping=step_data[index].get("input_mapping", {}),
            config=step_data[index],
            on_error=step.on_error,
        )
        for index, step in enumerate(spec.steps)
    )
    try:
        edges = [(e.source, e.target, e.when or "", e.inferred) for e in build_graph(spec).edges]
    except (GraphCycleError, KeyError, ValueError):
        # An invalid graph is still stored (the validator reports it before any run).
        edges = sorted({(e.from_, e.to, e.when or "", False) for e in spec.edges})
    Edge.objects.bulk_create(
        Edge(workflow=workflow, from_step=s, to_step=t, when=w, inferred=inf)
        for s, t, w, inf in edges
        if s != t
    )


def workflow_export(*, workflow: Workflow) -> dict[str, Any]:
    """The file form of a stored version (import → export → import is identical)."""
    return workflow_spec(workflow).to_data()


def workflow_archive(*, workflow: Workflow, actor: Actor | None) -> Workflow:
    """Archive a version (it never runs by name again); ``actor`` needs
    ``workflows.change_workflow`` (``tools.permissions``)."""
    permission_require(
        actor=actor, permission="workflows.change_workflow", action=f"archive {workflow}"
    )
    return workflow_transition(workflow=workflow, to=WorkflowStatus.ARCHIVED, actor=actor)


def workflow_transition(*, workflow: Workflow, to: str, actor: Actor | None = None) -> Workflow:
    """Move a version along its lifecycle, enforcing the declared transitions.

    No permission check: callers are services that checked theirs (approve, reject,
    edit, archive) or admin views that check the model permission first.
    """
    allowed = WORKFLOW_TRANSITIONS[WorkflowStatus(workflow.status)]
    if to not in allowed:
        raise WorkflowTransitionError(
            f"`{workflow}` is {workflow.status}; it cannot become {to} "
            f"(allowed: {', '.join(sorted(allowed)) or 'none'})"
        )
    with transaction.atomic():
        workflow.status = to
        fields = ["status", "updated_at"]
        if to == WorkflowStatus.ACTIVE:
            workflow.approved_by = actor_user(actor)
            workflow.approved_at = timezone.now()
            fields += ["approved_by", "approved_at"]
            _archive_other_active(workflow)
            hooks_announce(setting="FLOWPILOT_WORKFLOW_ACTIVATED_HOOKS", workflow_id=workflow.pk)
        workflow.save(update_fields=fields)
    return workflow


def _archive_other_active(workflow: Workflow) -> int:
    """One active version per name: activating a version archives the one it replaces.

    Runs keep pointing at the version they ran; archived versions never run by name.
    """
    return (
        Workflow.objects.filter(name=workflow.name, status=WorkflowStatus.ACTIVE)
        .exclude(pk=workflow.pk)
        .update(status=WorkflowStatus.ARCHIVED, updated_at=timezone.now())
    )


def workflow_activate_trusted(
    *, workflow: Workflow, actor: Actor | None = None, registry: ToolRegistry | None = None
) -> Workflow:
    """Operator shortcut (``importflow --activate --as SUPERUSER``): draft → active
    without review.

    For flows written and checked by an operator with shell access; the version is
    frozen exactly as an approved one is, and ``approved_by`` records who did it.
    Trust skips review and the validation run, never validation: the stored definition
    is checked against ``registry`` (the stored tools when ``None``) and
    ``WorkflowInvalid`` is raised, nothing activated, when it has errors, since an
    active version that does not validate would make every later run refuse.
    """
    if workflow.status == WorkflowStatus.ACTIVE:
        return workflow
    if workflow.status != WorkflowStatus.DRAFT:
        raise WorkflowTransitionError(f"`{workflow}` is {workflow.status}, not draft")
    tools = registry if registry is not None else ToolRegistry.from_db()
    validate_workflow(workflow_spec(workflow), registry=tools).raise_for_errors()
    with transaction.atomic():
        workflow.status = WorkflowStatus.ACTIVE
        workflow.approved_by = actor_user(actor)
        workflow.approved_at = timezone.now()
        _archive_other_active(workflow)
        workflow.save(update_fields=["status", "approved_by", "approved_at", "updated_at"])
        hooks_announce(setting="FLOWPILOT_WORKFLOW_ACTIVATED_HOOKS", workflow_id=workflow.pk)
    return workflow


def is_frozen(workflow: Workflow) -> bool:
    return workflow.status in FROZEN_STATUSES


CURATE_TEMPLATES_PERMISSION = "workflows.curate_templates"


def workflow_set_template_use(*, workflow: Workflow, use: str, actor: Actor | None) -> Workflow:
    """Mark a version as a planner template (``preferred``), exclude it (``excluded``) or
    leave it to similarity (``auto``); ``actor`` needs ``workflows.curate_templates``.

    Only the flag changes: the frozen definition is untouched, so it is allowed on an
    active version. Only active versions are ever shown to the planner.
    """
    permission_require(
        actor=actor, permission=CURATE_TEMPLATES_PERMISSION, action=f"curate templates ({workflow})"
    )
    if use not in TemplateUse.values:
        raise WorkflowError(f"template use {use!r} is none of {', '.join(TemplateUse.values)}")
    Workflow.objects.filter(pk=workflow.pk).update(template_use=use, updated_at=timezone.now())
    workflow.refresh_from_db()
    return workflow


def _cron(schedule: ScheduleSpec | None) -> str:
    """The stored cron text of a declared schedule ("" when none is declared)."""
    return schedule.cron if schedule is not None else ""
