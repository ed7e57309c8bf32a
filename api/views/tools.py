"""Tools: list (filter by kind, search), detail, load from YAML (staff)."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
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
)
from api.services.tools import tools_load_allowed


class ToolViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    lookup_field = "name"
    lookup_value_regex = "[A-Za-z0-9_-]{1,64}"
    filterset_class = ToolFilter
    required_perms = {
        "list": ["tools.view_tool"],
        "retrieve": ["tools.view_tool"],
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
