"""Schedules of workflows: list, create, detail, update, pause, resume, delete, fire log.

A schedule is addressed the way people name it: by workflow and schedule name
(``/schedules/sales_report/nightly/``). Bad rules (a cron firing every second, an
unknown timezone, interval 0…) are ``ScheduleInvalid``: a 400 naming the field.
"""

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import ScheduleFilter
from api.serializers.schedules import (
    ScheduleCreateSerializer,
    ScheduleFireSerializer,
    SchedulePauseSerializer,
    ScheduleRuleSerializer,
    ScheduleSerializer,
)
from schedules.models import Schedule
from schedules.selectors import schedule_fire_log, schedule_get, schedule_list
from schedules.services import (
    Policy,
    schedule_create,
    schedule_pause,
    schedule_remove,
    schedule_resume,
    schedule_update,
)

VIEW = ["schedules.view_schedule"]
CHANGE = [*VIEW, "schedules.change_schedule"]


def rule_of(data: dict) -> dict:
    """The service's keyword arguments for a validated ``ScheduleRuleSerializer``."""
    policy = Policy(
        overlap=data["overlap"],
        catchup_window=data["catchup_window"],
        pause_after_failures=data["pause_after_failures"],
        jitter=data["jitter"],
    )
    return {
        "cron": data["cron"],
        "tz": data["timezone"],
        "interval": data["interval"],
        "inputs": data["inputs"],
        "policy": policy,
    }


class ScheduleViewSet(viewsets.GenericViewSet):
    serializer_class = ScheduleSerializer
    filterset_class = ScheduleFilter
    required_perms = {
        "list": VIEW,
        "create": [*VIEW, "schedules.add_schedule"],
        "retrieve": VIEW,
        "update": CHANGE,
        "pause": CHANGE,
        "resume": CHANGE,
        "destroy": [*VIEW, "schedules.delete_schedule"],
        "fires": [*VIEW, "schedules.view_schedulefire"],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return schedule_list()

    def get_object(self) -> Schedule:
        schedule = schedule_get(workflow_name=self.kwargs["workflow"], name=self.kwargs["name"])
        if schedule is None:
            raise Http404("no such schedule")
        self.check_object_permissions(self.request, schedule)
        return schedule

    def list(self, request: Request) -> Response:
        """Every schedule by workflow and name; filter by workflow and paused."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(ScheduleSerializer(page, many=True).data)

    @extend_schema(request=ScheduleCreateSerializer, responses={201: ScheduleSerializer})
    def create(self, request: Request) -> Response:
        """Add a schedule (exactly one of cron and interval) to a stored workflow."""
        params = ScheduleCreateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        schedule = schedule_create(
            workflow_name=data["workflow"], name=data["name"], **rule_of(data)
        )
        return Response(ScheduleSerializer(schedule).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: ScheduleSerializer})
    def retrieve(self, request: Request, workflow: str, name: str) -> Response:
        return Response(ScheduleSerializer(self.get_object()).data)

    @extend_schema(request=ScheduleRuleSerializer, responses={200: ScheduleSerializer})
    def update(self, request: Request, workflow: str, name: str) -> Response:
        """Replace the rule, inputs and policies (omitted ones take their defaults)."""
        params = ScheduleRuleSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        schedule = schedule_update(schedule=self.get_object(), **rule_of(params.validated_data))
        return Response(ScheduleSerializer(schedule).data)

    @extend_schema(request=SchedulePauseSerializer, responses={200: ScheduleSerializer})
    def pause(self, request: Request, workflow: str, name: str) -> Response:
        """Stop firing (logged in the fire log); pausing a paused schedule changes nothing."""
        params = SchedulePauseSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        schedule = self.get_object()
        schedule_pause(schedule=schedule, reason=params.validated_data["reason"])
        return Response(ScheduleSerializer(schedule).data)

    @extend_schema(request=None, responses={200: ScheduleSerializer})
    def resume(self, request: Request, workflow: str, name: str) -> Response:
        """Fire again from the next fire time on; missed fires follow the catch-up window."""
        schedule = self.get_object()
        schedule_resume(schedule=schedule)
        return Response(ScheduleSerializer(schedule).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, workflow: str, name: str) -> Response:
        """Delete the schedule, its beat entry and its fire log (its runs stay)."""
        schedule_remove(schedule=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="schedules_fires_list",
        filters=False,
        responses={200: ScheduleFireSerializer(many=True)},
    )
    def fires(self, request: Request, workflow: str, name: str) -> Response:
        """The fire log, newest first: each fire time and what became of it."""
        page = self.paginate_queryset(schedule_fire_log(schedule=self.get_object()))
        return self.get_paginated_response(ScheduleFireSerializer(page, many=True).data)
