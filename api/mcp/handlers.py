"""What each tool of flowpilot's MCP server does, for one authenticated user.

Every handler does what the REST API's view for the same action does, with the same
parts: the view's permissions (``required_perms`` read from the view class, so the
two cannot drift), the view's request serializer to check the arguments, the one
service or selector the view calls, and the view's response serializer for the
answer. Refusals are raised as the API raises them (DRF exceptions, the app's
``FlowpilotError``); ``api.mcp.server`` turns them into the API's error body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django_filters import rest_framework as filters
from rest_framework import exceptions, serializers

from api.exceptions import ApiError
from api.filters import ToolFilter, WorkflowFilter
from api.parsers import unstorable_text
from api.selectors import plan_request_wait, run_detail_list, tool_list, workflow_versions
from api.serializers.approvals import ApprovalSerializer, ApproveSerializer, RejectSerializer
from api.serializers.plans import PlanCreateSerializer, PlanRequestSerializer
from api.serializers.runs import RunCreateSerializer, RunDetailSerializer
from api.serializers.tools import ToolDetailSerializer
from api.serializers.workflows import DefinitionSerializer, WorkflowSerializer
from api.services.runs import run_start
from api.views.approvals import ApprovalViewSet
from api.views.design import PlanViewSet
from api.views.runs import RunViewSet
from api.views.tools import ToolViewSet
from api.views.workflows import WorkflowViewSet, definition_of
from review.models import PlanKind
from review.plans import plan_request_create
from runs.approvals import approval_decide, approvals_pending_for
from runs.models import ApprovalRequest
from runs.state import RunTrigger
from runs.waiting import run_wait
from workflows.versions import workflow_check

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from tools.permissions import Actor

# The permissions of each tool: those of the API action doing the same thing.
PERMISSIONS: dict[str, tuple[str, ...]] = {
    "list_tools": tuple(ToolViewSet.required_perms["list"]),
    "list_workflows": tuple(WorkflowViewSet.required_perms["list"]),
    "validate_workflow": tuple(WorkflowViewSet.required_perms["validate"]),
    "plan_workflow": tuple(PlanViewSet.required_perms["create"]),
    "run_workflow": tuple(RunViewSet.required_perms["create"]),
    "get_run": tuple(RunViewSet.required_perms["retrieve"]),
    "list_approvals": tuple(ApprovalViewSet.required_perms["list"]),
    "decide_approval": tuple(ApprovalViewSet.required_perms["approve"]),
}
MAX_LIST = 200  # rows one list call answers at most (the API pages by 50)


def check_permission(*, user: Actor | None, tool: str) -> None:
    """``ModelPermissions`` for one MCP tool: an active user holding every permission."""
    if not (user and user.is_authenticated and user.is_active):
        raise exceptions.NotAuthenticated()
    if not user.has_perms(PERMISSIONS[tool]):
        raise exceptions.PermissionDenied()


def _checked(
    serializer_class: type[serializers.Serializer], data: Mapping[str, Any]
) -> serializers.Serializer:
    """The request serializer of the API action, valid, over ``data`` (storable text only)."""
    where = unstorable_text(dict(data))
    if where is not None:
        message = "text with a NUL character or a lone surrogate cannot be stored"
        details = [{"path": where, "code": "text_unstorable", "message": message}]
        raise ApiError(f"{where}: {message}", code="parse_error", status_code=400, details=details)
    params = serializer_class(data=dict(data))
    params.is_valid(raise_exception=True)
    return params


def _filtered(
    filterset_class: type[filters.FilterSet], queryset: QuerySet[Any], data: Mapping[str, Any]
) -> QuerySet[Any]:
    given = {k: v for k, v in data.items() if v is not None}
    filterset = filterset_class(data=given, queryset=queryset)
    if not filterset.is_valid():
        raise exceptions.ValidationError(filterset.errors)
    return filterset.qs


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIST:
        raise exceptions.ValidationError({"limit": [f"must be from 1 to {MAX_LIST}"]})
    return limit


def _wait_bound(seconds: float, field: str) -> float:
    if seconds < 0:
        raise exceptions.ValidationError({field: ["must be 0 or more seconds"]})
    return min(seconds, settings.FLOWPILOT_API_MAX_WAIT)


def list_tools(*, user: User, kind: str | None, search: str | None, limit: int) -> dict[str, Any]:
    """The registered tools with their input schemas and outputs (what a plan may use)."""
    check_permission(user=user, tool="list_tools")
    tools = _filtered(ToolFilter, tool_list(), {"kind": kind, "search": search})
    rows = tools[: _limit(limit) + 1]
    data = ToolDetailSerializer(rows[:limit], many=True).data
    return {"tools": list(data), "truncated": len(rows) > limit}


def list_workflows(
    *, user: User, name: str | None, status: str | None, limit: int
) -> dict[str, Any]:
    """Stored versions, by name, newest version first."""
    check_permission(user=user, tool="list_workflows")
    versions = _filtered(WorkflowFilter, workflow_versions(), {"name": name, "status": status})
    rows = versions[: _limit(limit) + 1]
    data = WorkflowSerializer(rows[:limit], many=True).data
    return {"workflows": list(data), "truncated": len(rows) > limit}


def validate_workflow(
    *, user: User, definition: dict[str, Any] | None, source: str | None
) -> dict[str, Any]:
    """Every issue of a definition (object or file text) against the registered tools."""
    check_permission(user=user, tool="validate_workflow")
    given = {k: v for k, v in {"definition": definition, "source": source}.items() if v is not None}
    report = workflow_check(data=definition_of(_checked(DefinitionSerializer, given)))
    return {"ok": report.ok, "issues": [i.as_dict() for i in report.issues]}


def plan_workflow(
    *, user: User, goal: str, sample_inputs: dict[str, Any] | None, wait: float
) -> dict[str, Any]:
    """Plan a goal; the proposed version is stored *pending review* — a person approves it.

    Waits up to ``wait`` seconds (at most ``FLOWPILOT_API_MAX_WAIT``) for a queued plan;
    without a broker the plan is finished before this returns.
    """
    check_permission(user=user, tool="plan_workflow")
    seconds = _wait_bound(wait, "wait")
    given = {"goal": goal, "sample_inputs": sample_inputs or {}}
    data = _checked(PlanCreateSerializer, given).validated_data
    plan = plan_request_create(kind=PlanKind.CREATE, user=user, **data)
    plan = plan_request_wait(request_id=plan.pk, timeout=seconds)
    return dict(PlanRequestSerializer(plan).data)


def run_workflow(
    *,
    user: User,
    workflow: str,
    version: int | None,
    inputs: dict[str, Any] | None,
    wait: float,
    idempotency_key: str | None,
) -> dict[str, Any]:
    """Run an active version (the newest, or the given one) with ``inputs``; with ``wait``
    seconds, answer when it has finished or the time is up (its ``status`` says which)."""
    check_permission(user=user, tool="run_workflow")
    seconds = _wait_bound(wait, "wait")
    given: dict[str, Any] = {"workflow": workflow, "inputs": inputs or {}}
    if version is not None:
        given["version"] = version
    data = _checked(RunCreateSerializer, given).validated_data
    run, _ = run_start(
        workflow_name=data["workflow"],
        version=data.get("version"),
        inputs=data["inputs"],
        user=user,
        idempotency_key=idempotency_key,
        trigger=RunTrigger.MCP,
    )
    if seconds:
        run_wait(run_id=run.pk, timeout=seconds)
    return dict(RunDetailSerializer(run_detail_list().get(pk=run.pk)).data)


def get_run(*, user: User, run_id: int, wait: float) -> dict[str, Any]:
    """A run with its step results, as stored (secrets masked); ``wait`` as for the API's
    long poll."""
    check_permission(user=user, tool="get_run")
    seconds = _wait_bound(wait, "wait")
    try:
        run = get_object_or_404(run_detail_list(), pk=run_id)
    except Http404:
        raise exceptions.NotFound(f"no run {run_id}") from None
    if seconds:
        run_wait(run_id=run.pk, timeout=seconds)
        run = run_detail_list().get(pk=run.pk)
    return dict(RunDetailSerializer(run).data)


def _approvals() -> QuerySet[ApprovalRequest]:
    return ApprovalViewSet().get_queryset()


def list_approvals(*, user: User, mine: bool, limit: int) -> dict[str, Any]:
    """Approval requests, newest first: with ``mine``, only the pending ones ``user`` may
    decide now (with the preview of what the run will send)."""
    check_permission(user=user, tool="list_approvals")
    rows = _approvals()
    if mine:
        rows = rows.filter(pk__in=[r.pk for r in approvals_pending_for(user)])
    found = list(rows[: _limit(limit) + 1])
    data = ApprovalSerializer(found[:limit], many=True, context={"user": user}).data
    return {"approvals": list(data), "truncated": len(found) > limit}


def decide_approval(
    *,
    user: User,
    approval_id: int,
    approve: bool,
    values: dict[str, Any] | None,
    comment: str,
    preview_hash: str,
) -> dict[str, Any]:
    """Approve (with the form's values) or reject an approval request, as ``user``."""
    check_permission(user=user, tool="decide_approval")
    if not _approvals().filter(pk=approval_id).exists():
        raise exceptions.NotFound(f"no approval request {approval_id}")
    given: dict[str, Any] = {"comment": comment, "preview_hash": preview_hash}
    if approve:
        given["values"] = values or {}
    data = _checked(ApproveSerializer if approve else RejectSerializer, given).validated_data
    approval_decide(request_id=approval_id, user=user, approve=approve, via="mcp", **data)
    answer = _approvals().get(pk=approval_id)
    return dict(ApprovalSerializer(answer, context={"user": user}).data)
