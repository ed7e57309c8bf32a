"""The event triggers in the admin, read-only: which workflows wait for which
(``EventTrigger``, written when a version is activated) and every event a trigger took,
with the run it started or why it started none (``TriggerEvent``). Neither is edited
here: a trigger is part of a workflow's approved definition."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from triggers.models import EventTrigger, TriggerEvent


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(EventTrigger)
class EventTriggerAdmin(_ReadOnly):
    list_display = ("workflow_name", "position", "kind", "source", "created_at")
    list_filter = ("kind",)
    search_fields = ("workflow_name", "source")
    readonly_fields = ("workflow_name", "position", "kind", "source", "created_at")


@admin.register(TriggerEvent)
class TriggerEventAdmin(_ReadOnly):
    list_display = ("created_at", "workflow_name", "source_run", "outcome", "run", "chain")
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
