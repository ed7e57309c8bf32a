"""Runs: create (Idempotency-Key), list (filters), detail with step results, cancel,
resume, restart from a step (Idempotency-Key), wait (long poll). Each run answered has
its ``llm_cost`` (a list reads its page's in one query)."""

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import RunFilter
from api.selectors import run_detail_list, run_list
from api.serializers.runs import (
    RunCreateSerializer,
    RunDetailSerializer,
    RunRestartSerializer,
    RunResumeSerializer,
    RunSerializer,
)
from api.services.runs import run_restart_start, run_start
from api.views.common import IDEMPOTENCY_KEY
from runs.costs import run_costs
from runs.services import run_cancel, run_resume
from runs.waiting import run_wait

VIEW = ["runs.view_run"]
OPERATE = [*VIEW, "runs.operate_run"]


class WaitSerializer(serializers.Serializer):
    timeout = serializers.FloatField(
        default=30.0, min_value=0.0, help_text="Seconds; capped at FLOWPILOT_API_MAX_WAIT."
    )

    def validate_timeout(self, value: float) -> float:
        return min(value, settings.FLOWPILOT_API_MAX_WAIT)


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    filterset_class = RunFilter
    required_perms = {
        "list": VIEW,
        "retrieve": VIEW,
        "wait": VIEW,
        "create": [*VIEW, "runs.add_run"],
        "cancel": OPERATE,
        "resume": OPERATE,
        "restart": OPERATE,
    }

    def get_queryset(self) -> QuerySet[Any]:
        return run_list() if self.action == "list" else run_detail_list()

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return RunSerializer if self.action == "list" else RunDetailSerializer

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Runs, newest first, a page at a time; each with its ``llm_cost``, the page's
        read in one query."""
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        runs = list(queryset) if page is None else page
        context = {**self.get_serializer_context(), "run_costs": run_costs(r.pk for r in runs)}
        data = RunSerializer(runs, many=True, context=context).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(
        request=RunCreateSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: RunDetailSerializer, 200: RunDetailSerializer},
    )
    def create(self, request: Request) -> Response:
        """Start a run of an active version. With an ``Idempotency-Key`` a repeated request
        answers 200 with the run the key created (201 the first time)."""
        params = RunCreateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        run, created = run_start(
            workflow_name=data["workflow"],
            version=data.get("version"),
            inputs=data["inputs"],
            user=request.user,
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
        body = RunDetailSerializer(run_detail_list().get(pk=run.pk)).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=None, responses={200: RunDetailSerializer})
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a queued, pending or running run (steps in flight finish; nothing new starts)."""
        run = self.get_object()
        run_cancel(run=run, actor=request.user)
        return Response(RunDetailSerializer(run_detail_list().get(pk=run.pk)).data)

    @extend_schema(request=RunResumeSerializer, responses={200: RunDetailSerializer})
    def resume(self, request: Request, pk: str) -> Response:
        """Continue a failed or cancelled run from its checkpoint."""
        params = RunResumeSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        run = run_resume(
            run=self.get_object(), force=params.validated_data["force"], actor=request.user
        )
        return Response(RunDetailSerializer(run_detail_list().get(pk=run.pk)).data)

    @extend_schema(
        request=RunRestartSerializer,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: RunDetailSerializer, 200: RunDetailSerializer},
    )
    def restart(self, request: Request, pk: str) -> Response:
        """Restart a finished run (succeeded, failed or cancelled) as a new run of the same
        version and inputs, linked to it: ``from_step`` and every step downstream of it
        run again, every other step's result is reused (never executed); without
        ``from_step``, every step runs again. With ``version``, the new run runs that (active)
        version of the workflow: steps changed since the run's version run again with their
        descendants; 409 ``restart_version_refused`` for a version not active or of another
        workflow, 409 ``restart_unfit`` naming every reused output or input that does not
        fit it. Started like ``POST /runs/`` (on the workers
        when a broker is configured). A re-run step whose tool is not idempotent needs
        ``confirm``: without it, 409 ``restart_needs_confirmation`` naming the steps. With
        an ``Idempotency-Key`` a repeated request answers 200 with the run it created."""
        params = RunRestartSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        run, created = run_restart_start(
            run=self.get_object(),
            from_step=data.get("from_step"),
            confirm=data["confirm"],
            user=request.user,
            idempotency_key=request.headers.get("Idempotency-Key"),
            version=data.get("version"),
        )
        body = RunDetailSerializer(run_detail_list().get(pk=run.pk)).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "timeout",
                {"type": "number", "minimum": 0},
                description="Seconds to wait, at most FLOWPILOT_API_MAX_WAIT (default 30).",
            )
        ],
        responses={200: RunDetailSerializer},
    )
    def wait(self, request: Request, pk: str) -> Response:
        """Answer when the run has finished or ``timeout`` seconds have passed, whichever
        comes first; the run's ``status`` tells which."""
        params = WaitSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        run = self.get_object()
        run_wait(run_id=run.pk, timeout=params.validated_data["timeout"])
        return Response(RunDetailSerializer(run_detail_list().get(pk=run.pk)).data)
