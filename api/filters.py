"""Query filters (django-filter); unknown values are a 400 naming the parameter."""

from datetime import UTC, datetime

from django.db.models import Q
from django_filters import rest_framework as filters

from runs.models import Run, RunStatus, RunTrigger
from tools.models import Tool, ToolKind
from workflows.models import Workflow, WorkflowStatus


class ToolFilter(filters.FilterSet):
    kind = filters.ChoiceFilter(choices=ToolKind.choices)
    search = filters.CharFilter(method="filter_search", help_text="In the name or description.")

    class Meta:
        model = Tool
        fields = ["kind"]

    def filter_search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(description__icontains=value))


class WorkflowFilter(filters.FilterSet):
    name = filters.CharFilter()
    status = filters.ChoiceFilter(choices=WorkflowStatus.choices)

    class Meta:
        model = Workflow
        fields = ["name", "status"]


class InstantFilter(filters.IsoDateTimeFilter):
    """An ISO 8601 instant, compared in UTC. ISO 8601 and Python accept any UTC offset
    under a day, PostgreSQL only up to ±15:59: an instant sent with ``-19:24`` is the
    same instant in UTC, never a database error. Past the calendar's ends it is clamped."""

    def filter(self, qs, value):
        if value is not None and value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                value = (datetime.min if value.year == 1 else datetime.max).replace(tzinfo=UTC)
        return super().filter(qs, value)


class RunFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow__name", help_text="The workflow's name.")
    version = filters.NumberFilter(field_name="workflow__version")
    status = filters.ChoiceFilter(choices=RunStatus.choices)
    trigger = filters.ChoiceFilter(choices=RunTrigger.choices)
    created_after = InstantFilter(field_name="created_at", lookup_expr="gte")
    created_before = InstantFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["workflow", "version", "status", "trigger"]
