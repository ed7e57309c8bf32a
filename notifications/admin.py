"""Admin: every report delivery, with its tries (read-only)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from notifications.models import Delivery


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("run", "channel", "event", "status", "attempts", "target", "created_at")
    list_filter = ("channel", "event", "status")
    search_fields = ("target", "run__workflow__name")
    readonly_fields = (
        "run", "channel", "event", "target", "status", "attempts", "attempt_log", "payload",
        "created_at", "delivered_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False
