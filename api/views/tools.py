"""Tools: list (filter by kind, search), detail, versions and a diff between two, load
from YAML (staff)."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, serializers, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import ToolFilter
from api.permissions import IsStaff, ModelPermissions
from api.selectors import tool_list
from api.serializers.tools import (
    ToolDetailSerializer,
    ToolLoadReportSerializer,
    ToolLoadSerializer,
    ToolSerializer,
    ToolVersionsDiffQuerySerializer,
    ToolVersionsDiffSerializer,
    ToolVersionSerializer,
)
from api.services.tools import tools_load_allowed
from tools.pins import VersionNotFound, tool_versions, tool_versions_diff


class ToolViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    lookup_field = "name"
    lookup_value_regex = "[A-Za-z0-9_-]{1,64}"
    filterset_class = ToolFilter
    required_perms = {
        "list": ["tools.view_tool"],
        "retrieve": ["tools.view_tool"],
        "versions": ["tools.view_tool"],
        "versions_diff": ["tools.view_tool"],
        "load": ["tools.add_tool", "tools.change_tool"],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return tool_list()

    def get_permissions(self) -> list[BasePermission]:
        staff_only = [IsStaff()] if self.action == "load" else []
        return [ModelPermissions(), *staff_only]

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return ToolDetailSerializer if self.action == "retrieve" else ToolSerializer

    @extend_schema(request=ToolLoadSerializer, responses={200: ToolLoadReportSerializer})
    def load(self, request: Request) -> Response:
        params = ToolLoadSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        report = tools_load_allowed(**params.validated_data)
        body = {"ok": report.ok, "tools": report.tools, "errors": report.errors}
        return Response(ToolLoadReportSerializer(body).data)

    @extend_schema(responses={200: ToolVersionSerializer(many=True)})
    def versions(self, request: Request, name: str) -> Response:
        """Every version of the tool, newest first, each with what changed since the one
        before (a tool that was removed keeps its history)."""
        rows = tool_versions(name=name)
        if not rows:
            raise exceptions.NotFound(f"tool `{name}` has no recorded versions")
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(ToolVersionSerializer(page, many=True).data)

    @extend_schema(
        parameters=[ToolVersionsDiffQuerySerializer],
        responses={200: ToolVersionsDiffSerializer},
    )
    def versions_diff(self, request: Request, name: str) -> Response:
        """What changed in the tool from version ``a`` to version ``b`` (numbers or
        semantic versions): each change with its level, and the definitions' JSON diff."""
        query = ToolVersionsDiffQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        a, b = query.validated_data["a"], query.validated_data["b"]
        try:
            diff = tool_versions_diff(name=name, old=a, new=b)
        except VersionNotFound as exc:
            raise exceptions.NotFound(str(exc)) from exc
        return Response(ToolVersionsDiffSerializer(diff.as_dict()).data)
