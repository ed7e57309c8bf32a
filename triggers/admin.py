"""The event triggers in the admin, read-only: which workflows wait for which, and which
poll which tool, with the poll's cursor and last error (``EventTrigger``, written when
a version is activated), and every event a trigger took, with the run it started or
why it started none (``TriggerEvent``). Neither is edited here: a trigger is part of a
workflow's approved definition. One action, **Poll now**, makes a poll trigger due at
beat's next tick (for whoever may start runs)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from triggers.models import EventTrigger, TriggerEvent
from triggers.polls import polls_make_due


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(EventTrigger)
class EventTriggerAdmin(_ReadOnly):
    list_display = (
        "workflow_name", "position", "kind", "source", "every_seconds", "polled_at",
        "next_poll_at", "short_error",
    )  # fmt: skip
    list_filter = ("kind",)
    search_fields = ("workflow_name", "source")
    readonly_fields = (
        "workflow_name", "position", "kind", "source", "statuses", "every_seconds",
        "next_poll_at", "polled_at", "last_error", "cursor", "cursor_version", "fingerprint",
        "created_at",
    )  # fmt: skip
    actions = ("poll_now",)

    @admin.display(description="last error")
    def short_error(self, obj: EventTrigger) -> str:
        return obj.last_error[:120]

    def has_poll_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("runs.add_run")

    @admin.action(description="Poll now (at beat's next tick)", permissions=["poll"])
    def poll_now(self, request: HttpRequest, queryset: QuerySet[EventTrigger]) -> None:
        selected = list(queryset.values_list("pk", flat=True))
        count = polls_make_due(trigger_ids=selected)
        skipped = len(selected) - count
        note = f"; {skipped} selected are no poll triggers" if skipped else ""
        self.message_user(request, f"{count} poll triggers due now{note}.", messages.SUCCESS)


@admin.register(TriggerEvent)
class TriggerEventAdmin(_ReadOnly):
    list_display = (
        "created_at", "workflow_name", "position", "event_key", "source_run", "outcome", "run",
        "chain",
    )  # fmt: skip
    list_select_related = ("source_run__workflow", "run__workflow")  # a run names its workflow
    list_filter = ("outcome", "workflow_name")
    search_fields = ("workflow_name", "event_key", "message")

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # A run page links the events its end caused (triggers.links).
        return lookup == "source_run__id__exact" or super().lookup_allowed(lookup, value, request)

    readonly_fields = (
        "workflow_name", "position", "event_key", "source_run", "run", "outcome", "message",
        "chain", "created_at",
    )  # fmt: skip
