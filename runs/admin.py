"""Run admin: status, inputs, outputs, errors and a per-step timeline."""

import json

from django.contrib import admin
from django.utils.html import format_html

from runs import workflow_admin  # noqa: F401 - registers the Workflow review admin
from runs.models import Run, StepResult


def pretty_json(value) -> str:
    if value is None:
        return "-"
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json.dumps(value, indent=2))


def _ms(delta) -> str:
    return f"{delta.total_seconds() * 1000:.0f} ms" if delta is not None else "-"


class StepResultInline(admin.TabularInline):
    model = StepResult
    extra = 0
    can_delete = False
    fields = (
        "step_id",
        "status",
        "attempts",
        "started_at",
        "took",
        "resolved_inputs",
        "step_output",
        "step_error",
        "output_truncated",
    )
    readonly_fields = fields
    ordering = ("started_at", "step_id")

    @admin.display(description="duration")
    def took(self, obj):
        return _ms(obj.duration)

    @admin.display(description="inputs")
    def resolved_inputs(self, obj):
        return pretty_json(obj.inputs)

    @admin.display(description="output")
    def step_output(self, obj):
        return pretty_json(obj.output)

    @admin.display(description="error")
    def step_error(self, obj):
        return pretty_json(obj.error)

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "workflow", "trigger", "status", "created_at", "took")
    list_filter = ("status", "trigger", "workflow__name")
    search_fields = ("workflow__name", "error_summary")
    date_hierarchy = "created_at"
    inlines = [StepResultInline]
    readonly_fields = (
        "workflow",
        "definition_hash",
        "trigger",
        "status",
        "pretty_inputs",
        "pretty_outputs",
        "error_summary",
        "created_at",
        "started_at",
        "finished_at",
        "took",
    )
    fields = readonly_fields

    @admin.display(description="duration")
    def took(self, obj):
        return _ms(obj.duration)

    @admin.display(description="inputs")
    def pretty_inputs(self, obj):
        return pretty_json(obj.inputs)

    @admin.display(description="outputs")
    def pretty_outputs(self, obj):
        return pretty_json(obj.outputs)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # run history is a record; it changes only through services
