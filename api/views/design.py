"""The design phase over HTTP: plan a goal, revise or reject with feedback, approve.

Planning is asynchronous: ``POST /plans/`` (and revise, reject) answer 202 with a
plan request to poll at its ``url`` until ``succeeded`` (its ``workflow`` is the
proposed version, pending review) or ``failed`` (its ``error``). Approving runs
the validation run before it answers.
"""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.selectors import plan_request_list
from api.serializers.plans import PlanCreateSerializer, PlanRequestSerializer
from api.serializers.workflows import ApprovalSerializer, ApproveSerializer, FeedbackSerializer
from api.views.workflows import VIEW, WorkflowViewSet
from review.models import Approval, PlanKind
from review.plans import plan_request_create
from review.policy import approval_tally
from review.services import workflow_approve


class PlanViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = PlanRequestSerializer
    required_perms = {
        "list": VIEW,
        "retrieve": VIEW,
        "create": ["workflows.add_workflow"],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return plan_request_list()

    @extend_schema(request=PlanCreateSerializer, responses={202: PlanRequestSerializer})
    def create(self, request: Request) -> Response:
        """Plan a goal; poll the answer's ``url`` until it has finished."""
        params = PlanCreateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        plan = plan_request_create(kind=PlanKind.CREATE, user=request.user, **params.validated_data)
        return Response(PlanRequestSerializer(plan).data, status=status.HTTP_202_ACCEPTED)


class VersionDesignViewSet(WorkflowViewSet):
    """The design-phase actions on one version."""

    required_perms = {
        "approve": [*VIEW, "workflows.approve_workflow"],
        "reject": [*VIEW, "workflows.change_workflow"],
        "revise": [*VIEW, "workflows.change_workflow"],
    }

    @extend_schema(request=ApproveSerializer, responses={200: ApprovalSerializer})
    def approve(self, request: Request, name: str, version: int) -> Response:
        """Approve a version pending review. While its approval policy needs more distinct
        approvers the approval is recorded `pending`; the one that meets the policy runs
        the validation run with its sample inputs: green makes the version active, red
        sends it back to review (the run says why). The author where the policy refuses
        authors, and the same person twice, are refused (403 `approval_policy_refused`)."""
        params = ApproveSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        approval = workflow_approve(
            version=self.get_object(),
            approved_by=request.user,
            sample_inputs=params.validated_data["sample_inputs"],
        )
        return Response(ApprovalSerializer(approval_body(approval)).data)

    @extend_schema(request=FeedbackSerializer, responses={202: PlanRequestSerializer})
    def reject(self, request: Request, name: str, version: int) -> Response:
        """Reject a version pending review; the planner revises it into the next version."""
        return self._replan(request, PlanKind.REJECT)

    @extend_schema(request=FeedbackSerializer, responses={202: PlanRequestSerializer})
    def revise(self, request: Request, name: str, version: int) -> Response:
        """Ask the planner for a revision of a version pending review (or rejected)."""
        return self._replan(request, PlanKind.REVISE)

    def _replan(self, request: Request, kind: str) -> Response:
        params = FeedbackSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        plan = plan_request_create(
            kind=kind, user=request.user, based_on=self.get_object(), **params.validated_data
        )
        return Response(PlanRequestSerializer(plan).data, status=status.HTTP_202_ACCEPTED)


def approval_body(approval: Approval) -> dict:
    run = approval.validation_run
    link = {"id": run.pk, "status": run.status, "url": f"/api/v1/runs/{run.pk}/"} if run else None
    tally = approval_tally(version=approval.workflow)
    return {
        "id": approval.pk,
        "status": approval.status,
        "workflow": approval.workflow,
        "validation_run": link,
        "approvals_given": tally.count,
        "approvals_required": tally.policy.required,
        "approvers": [a.username for a in tally.approvers],
    }
