"""Tool admin: browse, search, and enable/disable tools (through a service)."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils.html import format_html
from django.utils.translation import ngettext

from tools.models import Tool
from tools.permissions import PermissionRefused
from tools.services import tools_set_enabled


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "enabled", "updated_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "description", "source")
    ordering = ("name",)
    readonly_fields = ("pretty_spec", "pretty_input_schema", "created_at", "updated_at")
    fields = (
        "name",
        "kind",
        "enabled",
        "description",
        "outputs",
        "source",
        "pretty_input_schema",
        "pretty_spec",
        "created_at",
        "updated_at",
    )
    actions = ("enable_tools", "disable_tools")

    def has_add_permission(self, request) -> bool:
        # Definitions come from files (`loadtools`) and providers; only `enabled` is edited here.
        return False

    def get_readonly_fields(self, request, obj=None):
        return (*self.readonly_fields, "name", "kind", "description", "outputs", "source")

    @admin.display(description="Spec (templates only, no secrets)")
    def pretty_spec(self, obj: Tool) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.spec, indent=2, sort_keys=True))

    @admin.display(description="Input schema")
    def pretty_input_schema(self, obj: Tool) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.input_schema, indent=2))

    def _set_enabled(self, request, queryset, enabled: bool) -> None:
        try:
            changed = tools_set_enabled(tools=queryset, enabled=enabled, actor=request.user)
        except PermissionRefused as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return
        verb = "enabled" if enabled else "disabled"
        self.message_user(
            request,
            ngettext("%(count)d tool was %(verb)s.", "%(count)d tools were %(verb)s.", changed)
            % {"count": changed, "verb": verb},
            messages.SUCCESS,
        )

    @admin.action(description="Enable selected tools", permissions=["change"])
    def enable_tools(self, request, queryset):
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected tools", permissions=["change"])
    def disable_tools(self, request, queryset):
        self._set_enabled(request, queryset, False)
