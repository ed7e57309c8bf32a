"""Approval requests of ``approval`` steps: list (those waiting for you with
``?mine=true``), read one with its preview, approve with the form's values, reject."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import ApprovalFilter
from api.serializers.approvals import ApprovalSerializer, ApproveSerializer, RejectSerializer
from runs.approvals import approval_decide
from runs.models import ApprovalRequest

VIEW = ["runs.view_approvalrequest"]


class ApprovalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = ApprovalSerializer
    filterset_class = ApprovalFilter
    # Reading needs the view permission (a preview shows what the run will send);
    # deciding is checked by the service: a named approver, or `runs.approve_run`.
    required_perms = {"list": VIEW, "retrieve": VIEW, "approve": VIEW, "reject": VIEW}

    def get_queryset(self) -> QuerySet[Any]:
        return (
            ApprovalRequest.objects.select_related("run__workflow", "author")
            .prefetch_related("decisions")
            .order_by("-created_at", "-id")
        )

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "mine", bool, description="true: only the pending ones you may decide now."
            )
        ]
    )
    def list(self, request: Request) -> Response:
        """Approval requests, newest first; filter by `status`, `workflow`, `run`, `mine`."""
        return super().list(request)

    @extend_schema(request=ApproveSerializer, responses={200: ApprovalSerializer})
    def approve(self, request: Request, pk: str) -> Response:
        """Approve with the form's values; the `required`-th approval lets the run go on."""
        params = ApproveSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        decided = approval_decide(
            request_id=self.get_object().pk, user=request.user, approve=True, via="api",
            **params.validated_data,
        )  # fmt: skip
        return Response(self.get_serializer(self.get_queryset().get(pk=decided.pk)).data)

    @extend_schema(request=RejectSerializer, responses={200: ApprovalSerializer})
    def reject(self, request: Request, pk: str) -> Response:
        """Reject: the step fails (or as its `on_error` says), and the run goes on so."""
        params = RejectSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        decided = approval_decide(
            request_id=self.get_object().pk, user=request.user, approve=False, via="api",
            **params.validated_data,
        )  # fmt: skip
        return Response(self.get_serializer(self.get_queryset().get(pk=decided.pk)).data)
