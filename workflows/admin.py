"""Workflow admin: versions with their steps and edges. Frozen versions are read-only."""

import json

from django.contrib import admin, messages
from django.utils.html import format_html
from django.utils.translation import ngettext

from workflows.models import Edge, Step, Workflow, WorkflowStatus
from workflows.services import WorkflowTransitionError, is_frozen, workflow_transition


def pretty_json(value) -> str:
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json.dumps(value, indent=2))


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    can_delete = False
    fields = ("position", "step_id", "kind", "tool", "mapping", "on_error")
    readonly_fields = fields
    ordering = ("position",)

    @admin.display(description="input mapping")
    def mapping(self, obj):
        return pretty_json(obj.input_mapping)

    def has_add_permission(self, request, obj=None):
        return False


class EdgeInline(admin.TabularInline):
    model = Edge
    extra = 0
    can_delete = False
    fields = ("from_step", "to_step", "when", "inferred")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "status", "step_count", "approved_by", "created_at")
    list_filter = ("status",)
    search_fields = ("name", "description", "goal")
    ordering = ("name", "-version")
    inlines = [StepInline, EdgeInline]
    readonly_fields = (
        "name",
        "version",
        "definition_hash",
        "pretty_definition",
        "approved_by",
        "approved_at",
        "created_at",
        "updated_at",
    )
    fields = (
        "name",
        "version",
        "status",
        "description",
        "goal",
        "owner",
        "definition_hash",
        "pretty_definition",
        "approved_by",
        "approved_at",
        "created_at",
        "updated_at",
    )
    actions = ["archive"]

    @admin.display(description="steps")
    def step_count(self, obj):
        return obj.steps.count()

    @admin.display(description="definition")
    def pretty_definition(self, obj):
        return pretty_json(obj.definition)

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and is_frozen(obj):
            return (*self.readonly_fields, "status", "description", "goal", "owner")
        return (*self.readonly_fields, "status")

    def has_add_permission(self, request):
        return False  # versions come from files, the planner or the API

    @admin.action(description="Archive selected versions")
    def archive(self, request, queryset):
        done, refused = 0, []
        for workflow in queryset.order_by("name", "version"):
            try:
                workflow_transition(workflow=workflow, to=WorkflowStatus.ARCHIVED)
                done += 1
            except WorkflowTransitionError as exc:
                refused.append(exc.message)
        if done:
            self.message_user(
                request,
                ngettext("%d version archived.", "%d versions archived.", done) % done,
                messages.SUCCESS,
            )
        for message in refused:
            self.message_user(request, message, messages.WARNING)
