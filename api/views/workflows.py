"""Workflow versions: list, create (validated), validate, versions, detail, export, archive,
replay (offline, against a validation run's recorded calls).

Versions are addressed by name and number (``/workflows/sales_report/versions/2/``),
the way people name them; the design-phase actions on one version are in
``api.views.design``.
"""

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import WorkflowFilter
from api.selectors import run_list, workflow_describe, workflow_versions
from api.serializers.runs import ReplayReportSerializer, ReplayRequestSerializer
from api.serializers.workflows import (
    DefinitionSerializer,
    ExportSerializer,
    ScenarioResultsSerializer,
    ValidationSerializer,
    WorkflowCreateSerializer,
    WorkflowDetailSerializer,
    WorkflowSerializer,
)
from runs.replay.report import ReplayReport
from workflows.files import dump_workflow, parse_workflow_text
from workflows.models import Workflow
from workflows.services import workflow_archive, workflow_export
from workflows.versions import workflow_check, workflow_create_version

VIEW = ["workflows.view_workflow"]


def replay_body(report: ReplayReport) -> dict:
    """The replay report as the API answers it: ids, verdicts, the summary line."""
    return {
        **report.as_dict(),
        "replay_run_url": f"/api/v1/runs/{report.replay_run.pk}/",
        "summary": report.summary,
    }


def definition_of(params: serializers.Serializer) -> dict:
    """The definition a request sent: the object, or the parsed file text."""
    data = params.validated_data
    if "definition" in data:
        return data["definition"]
    return parse_workflow_text(data["source"], source="source")


class WorkflowViewSet(viewsets.GenericViewSet):
    serializer_class = WorkflowSerializer
    filterset_class = WorkflowFilter
    required_perms = {
        "list": VIEW,
        "create": ["workflows.add_workflow"],
        "validate": VIEW,
        "versions": VIEW,
        "retrieve": VIEW,
        "export": VIEW,
        "archive": ["workflows.change_workflow"],
        "replay": [*VIEW, "runs.view_run", "runs.operate_run"],
        "tests": [*VIEW, "runs.view_run"],  # its failures quote what replay runs returned
        "tests_run": [*VIEW, "runs.view_run", "runs.operate_run"],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return workflow_versions()

    def get_object(self) -> Workflow:
        version = get_object_or_404(
            workflow_versions(), name=self.kwargs["name"], version=self.kwargs["version"]
        )
        self.check_object_permissions(self.request, version)
        return version

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(WorkflowSerializer(page, many=True).data)

    @extend_schema(
        request=WorkflowCreateSerializer,
        responses={201: WorkflowSerializer, 200: WorkflowSerializer},
    )
    def create(self, request: Request) -> Response:
        """Store a definition as the next version; 400 lists every issue with its path.
        An unchanged definition answers 200 with the newest version."""
        params = WorkflowCreateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        version, created = workflow_create_version(
            data=definition_of(params), owner=request.user, status=params.validated_data["status"]
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(WorkflowSerializer(version).data, status=code)

    @extend_schema(request=DefinitionSerializer, responses={200: ValidationSerializer})
    def validate(self, request: Request) -> Response:
        """Every issue of a definition against the registered tools; nothing is stored."""
        params = DefinitionSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        report = workflow_check(data=definition_of(params))
        body = {"ok": report.ok, "issues": [i.as_dict() for i in report.issues]}
        return Response(ValidationSerializer(body).data)

    @extend_schema(
        operation_id="workflows_versions_list", responses={200: WorkflowSerializer(many=True)}
    )
    def versions(self, request: Request, name: str) -> Response:
        """Every version of one workflow, newest first."""
        page = self.paginate_queryset(self.filter_queryset(workflow_versions().filter(name=name)))
        return self.get_paginated_response(WorkflowSerializer(page, many=True).data)

    @extend_schema(responses={200: WorkflowDetailSerializer})
    def retrieve(self, request: Request, name: str, version: int) -> Response:
        """The definition, the graph as nodes and edges, the validator's report, the hash."""
        described = workflow_describe(workflow=self.get_object())
        return Response(WorkflowDetailSerializer(described).data)

    @extend_schema(responses={200: ExportSerializer})
    def export(self, request: Request, name: str, version: int) -> Response:
        """The file form (import → export → import gives the same version)."""
        workflow = self.get_object()
        data = workflow_export(workflow=workflow)
        body = {
            "name": workflow.name,
            "version": workflow.version,
            "definition": data,
            "yaml": dump_workflow(data, fmt="yaml"),
        }
        return Response(ExportSerializer(body).data)

    @extend_schema(request=None, responses={200: WorkflowSerializer})
    def archive(self, request: Request, name: str, version: int) -> Response:
        """Archive a version; it never runs by name again (its runs stay)."""
        workflow = workflow_archive(workflow=self.get_object(), actor=request.user)
        return Response(WorkflowSerializer(workflow).data)

    @extend_schema(request=ReplayRequestSerializer, responses={200: ReplayReportSerializer})
    def replay(self, request: Request, name: str, version: int) -> Response:
        """Replay the version offline: a new run (trigger ``replay``) whose every HTTP call
        is answered from a validation run's recordings — nothing is sent — compared step by
        step with that validation run. Runs in this request (no network, no workers); 200
        with ``matched`` false when a step differs. Refused (400 ``replay_refused``) for a
        run that is not a validation run of this version, a version without a succeeded
        validation run, and steps that do not call over HTTP (``llm`` steps, LLM
        decisions, MCP tools)."""
        params = ReplayRequestSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        workflow = self.get_object()
        run_id = params.validated_data.get("validation_run")
        source = None
        if run_id is not None:
            source = run_list().filter(pk=run_id).first()
            if source is None:
                raise exceptions.ValidationError({"validation_run": [f"no run {run_id}"]})
        from runs.replay.services import version_replay  # loaded by a replay only

        report = version_replay(version=workflow, validation_run=source, actor=request.user)
        return Response(ReplayReportSerializer(replay_body(report)).data)

    @extend_schema(request=None, responses={200: ScenarioResultsSerializer})
    def tests(self, request: Request, name: str, version: int) -> Response:
        """The version's test scenarios (``tests:``), each with its newest result for this
        definition (``not_run`` when never run)."""
        return Response(scenarios_body(self.get_object()))

    @extend_schema(
        operation_id="workflows_versions_tests_run",
        request=None,
        responses={200: ScenarioResultsSerializer},
    )
    def tests_run(self, request: Request, name: str, version: int) -> Response:
        """Run the version's test scenarios now, offline against a validation run's
        recorded calls (the version's own, else its predecessor's), in this request."""
        from runs.scenarios import scenarios_run  # loaded by a run of the scenarios only

        workflow = self.get_object()
        scenarios_run(version=workflow)
        return Response(scenarios_body(workflow))


def scenarios_body(workflow: Workflow) -> Any:
    """Each declared scenario with its newest result (``runs.scenarios``)."""
    from runs.scenarios import scenario_rows

    rows = [
        {"scenario": r.name, "status": r.status, "failures": list(r.failures), "run": r.run_id,
         "validation_run": r.validation_run_id, "created_at": r.created_at}
        for r in scenario_rows(version=workflow)
    ]  # fmt: skip
    return ScenarioResultsSerializer({"version": workflow.version, "scenarios": rows}).data
