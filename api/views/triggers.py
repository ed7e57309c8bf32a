"""Event and poll triggers and the events they took: read-only lists (a trigger changes
with a new version of its workflow), and **poll now** for a poll trigger."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import EventTriggerFilter, TriggerEventFilter
from api.serializers.triggers import EventTriggerSerializer, TriggerEventSerializer
from triggers.models import EventTrigger, TriggerEvent, TriggerKind
from triggers.polls import polls_make_due

VIEW_TRIGGERS = ["triggers.view_eventtrigger"]


class EventTriggerViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """The triggers the active versions declare: which workflow waits for which, which
    polls which tool (with its cursor, last poll, next poll and last error)."""

    serializer_class = EventTriggerSerializer
    filterset_class = EventTriggerFilter
    required_perms = {
        "list": VIEW_TRIGGERS,
        "retrieve": VIEW_TRIGGERS,
        # Making a poll happen now starts runs: whoever may start runs.
        "poll": [*VIEW_TRIGGERS, "runs.add_run"],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return EventTrigger.objects.order_by("workflow_name", "position")

    @extend_schema(request=None, responses={200: EventTriggerSerializer})
    def poll(self, request: Request, pk: str) -> Response:
        """Make a poll trigger due now: beat's next tick polls it (FLOWPILOT_TRIGGER_POLL_TICK)."""
        trigger = self.get_object()
        if trigger.kind != TriggerKind.POLL:
            raise exceptions.ValidationError({"kind": ["only a poll trigger can be polled"]})
        polls_make_due(trigger_ids=[trigger.pk])
        trigger.refresh_from_db()
        return Response(EventTriggerSerializer(trigger).data)


class TriggerEventViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """Every event a trigger took, newest first: the finished run or the poll's item (its
    key), and the run it started or why it started none."""

    serializer_class = TriggerEventSerializer
    filterset_class = TriggerEventFilter
    required_perms = {
        "list": ["triggers.view_triggerevent"],
        "retrieve": ["triggers.view_triggerevent"],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return TriggerEvent.objects.order_by("-created_at", "-id")
