"""Query filters (django-filter); unknown values are a 400 naming the parameter.

Every value is parsed with bounds: a version is a whole number the database column
can hold (``0.5`` or ``1e3`` was read as a decimal and matched nothing, a 200).
"""

from datetime import UTC, datetime

from django import forms
from django.db.models import Q, QuerySet
from django_filters import fields
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema_field

from runs.approvals import approvals_pending_for
from runs.models import ApprovalRequest, ApprovalStatus, Run, RunStatus, RunTrigger
from schedules.models import Schedule
from tools.models import Tool, ToolKind
from triggers.models import EventOutcome, EventTrigger, TriggerEvent, TriggerKind
from workflows.models import Workflow, WorkflowStatus


class ToolFilter(filters.FilterSet):
    kind = filters.ChoiceFilter(choices=ToolKind.choices)
    search = filters.CharFilter(method="filter_search", help_text="In the name or description.")

    class Meta:
        model = Tool
        fields = ["kind"]

    def filter_search(self, queryset: QuerySet[Tool], name: str, value: str) -> QuerySet[Tool]:
        return queryset.filter(Q(name__icontains=value) | Q(description__icontains=value))


class WorkflowFilter(filters.FilterSet):
    name = filters.CharFilter()
    status = filters.ChoiceFilter(choices=WorkflowStatus.choices)

    class Meta:
        model = Workflow
        fields = ["name", "status"]


MAX_VERSION = 2**31 - 1  # the largest number every database's integer column holds


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_VERSION})
class VersionFilter(filters.NumberFilter):
    """A version number: a whole number from 1 to ``MAX_VERSION``."""

    field_class = forms.IntegerField

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_VERSION)
        super().__init__(*args, **kwargs)


MAX_ID = 2**63 - 1  # the largest id a big integer column holds


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(filters.NumberFilter):
    """A row's id: a whole number from 1 to ``MAX_ID``."""

    field_class = forms.IntegerField

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class UtcDateTimeField(fields.IsoDateTimeField):
    """An ISO 8601 time read as UTC: PostgreSQL refuses offsets beyond ±15:59 (a 500).

    A parameter given empty (``?created_before=``) is refused, not read as absent.
    """

    def to_python(self, value: str | None) -> datetime | None:
        if value is not None and not value.strip():
            raise forms.ValidationError("a date-time is needed (ISO 8601)", code="invalid")
        moment = super().to_python(value)
        if moment is None:
            return None
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("the time is out of range", code="invalid") from None


class UtcDateTimeFilter(filters.IsoDateTimeFilter):
    field_class = UtcDateTimeField


class RunFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow__name", help_text="The workflow's name.")
    version = VersionFilter(field_name="workflow__version")
    status = filters.ChoiceFilter(choices=RunStatus.choices)
    trigger = filters.ChoiceFilter(choices=RunTrigger.choices)
    created_after = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["workflow", "version", "status", "trigger"]


class StrictBooleanField(forms.Field):
    """``true`` or ``false`` (also ``1``/``0``); anything else given is a 400, not ignored
    (django-filter's own reads ``paused=null`` as absent)."""

    VALUES = {"true": True, "1": True, "false": False, "0": False}

    def to_python(self, value: str | None) -> bool | None:
        if value is None:  # absent
            return None
        if value.strip().lower() not in self.VALUES:
            raise forms.ValidationError("must be true or false", code="invalid")
        return self.VALUES[value.strip().lower()]

    def validate(self, value: bool | None) -> None:
        """Absent is allowed (``required`` would refuse ``False``)."""


class StrictBooleanFilter(filters.BooleanFilter):
    field_class = StrictBooleanField

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs["widget"] = forms.TextInput  # the text as sent (the default widget guesses)
        super().__init__(*args, **kwargs)


class ScheduleFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name", help_text="The workflow's name.")
    paused = StrictBooleanFilter()

    class Meta:
        model = Schedule
        fields = ["workflow", "paused"]


class EventTriggerFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name", help_text="The waiting workflow.")
    kind = filters.ChoiceFilter(choices=TriggerKind.choices)

    class Meta:
        model = EventTrigger
        fields = ["workflow", "kind"]


class TriggerEventFilter(filters.FilterSet):
    workflow = filters.CharFilter(field_name="workflow_name", help_text="The triggered workflow.")
    outcome = filters.ChoiceFilter(choices=EventOutcome.choices)
    source_run = IdFilter(field_name="source_run_id", help_text="The finished run's id.")
    run = IdFilter(field_name="run_id", help_text="The id of the run it started.")

    class Meta:
        model = TriggerEvent
        fields = ["workflow", "outcome", "source_run", "run"]


class ApprovalFilter(filters.FilterSet):
    status = filters.ChoiceFilter(choices=ApprovalStatus.choices)
    workflow = filters.CharFilter(field_name="run__workflow__name", help_text="The workflow.")
    run = IdFilter(field_name="run_id", help_text="The run's id.")
    mine = StrictBooleanFilter(
        method="filter_mine", help_text="true: pending, and yours to decide."
    )

    class Meta:
        model = ApprovalRequest
        fields = ["status", "workflow", "run", "mine"]

    def filter_mine(
        self, queryset: QuerySet[ApprovalRequest], name: str, value: bool | None
    ) -> QuerySet[ApprovalRequest]:
        if not value:
            return queryset
        yours = [r.pk for r in approvals_pending_for(self.request.user)]
        return queryset.filter(pk__in=yours)
