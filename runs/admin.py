"""Run admin: status, inputs, outputs, errors and a per-step timeline."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import ngettext

from runs.models import Run, RunTrigger, StepResult
from runs.services import run_cancel, run_repeat, run_resume
from tools.errors import FlowpilotError
from tools.jsondata import json_preview


def pretty_json(value) -> str:
    """A stored value as a capped preview: no page renders a whole multi-megabyte record."""
    if value is None:
        return "-"
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json_preview(value))


def run_link(run: Run) -> str:
    """A link to a run's admin page: ``run 12 (geo_weather v1, succeeded)``."""
    url = reverse("admin:runs_run_change", args=[run.pk])
    return format_html("<a href='{}'>run {} ({}, {})</a>", url, run.pk, run.workflow, run.status)


def child_run_links(runs) -> str:
    """Links to the child runs of `workflow` steps, with the step each serves."""
    rows = [(run_link(child), child.parent_step.step_id) for child in runs]
    if not rows:
        return "-"
    return format_html_join(format_html("<br>"), "{} for step <code>{}</code>", rows)


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
        "child_run",
    )
    readonly_fields = fields
    ordering = ("started_at", "step_id")

    @admin.display(description="child run")
    def child_run(self, obj):
        """The child run(s) of a `workflow` step, newest last."""
        children = obj.child_runs.select_related("workflow", "parent_step").order_by("pk")
        return child_run_links(children)

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
    list_display = ("id", "workflow", "trigger", "status", "created_at", "took", "parent")
    list_filter = ("status", "trigger", "workflow__name")
    list_select_related = ("workflow", "parent_run__workflow", "parent_step")
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
        "parent",
        "children",
    )
    fields = readonly_fields

    @admin.display(description="parent run")
    def parent(self, obj):
        """The run whose `workflow` step started this one (a child run)."""
        if obj.parent_run_id is None:
            return "-"
        step = obj.parent_step.step_id if obj.parent_step_id else "?"
        return format_html("{}, step <code>{}</code>", run_link(obj.parent_run), step)

    @admin.display(description="child runs")
    def children(self, obj):
        """The runs its `workflow` steps started."""
        runs = obj.child_runs.select_related("workflow", "parent_step").order_by("pk")
        return child_run_links(runs)

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

    # --- actions: each calls one service and reports what it did -----------------

    actions = ["run_again", "resume_runs", "cancel_runs"]

    def has_operate_permission(self, request) -> bool:
        return request.user.has_perm("runs.operate_run")

    @admin.action(
        description="Run again (same version and inputs; on the workers if configured)",
        permissions=["operate"],
    )
    def run_again(self, request, queryset):
        started, refused = [], []
        for run in queryset.select_related("workflow").order_by("pk"):
            try:
                started.append(
                    run_repeat(run=run, trigger=RunTrigger.MANUAL, actor=request.user)
                )
            except FlowpilotError as exc:
                refused.append(f"run {run.pk}: {exc.message}")
        self._report(
            request, started, refused, "%(count)d new run started", "%(count)d new runs started"
        )

    @admin.action(
        description="Resume from the checkpoint (failed or cancelled runs)",
        permissions=["operate"],
    )
    def resume_runs(self, request, queryset):
        resumed, refused = [], []
        for run in queryset.select_related("workflow").order_by("pk"):
            try:
                resumed.append(run_resume(run=run, actor=request.user))
            except FlowpilotError as exc:
                refused.append(exc.message)
        self._report(request, resumed, refused, "%(count)d run resumed", "%(count)d runs resumed")

    @admin.action(
        description="Cancel (queued steps never start; steps in flight finish)",
        permissions=["operate"],
    )
    def cancel_runs(self, request, queryset):
        cancelled, refused = [], []
        for run in queryset.order_by("pk"):
            try:
                done = run_cancel(run=run, actor=request.user)
            except FlowpilotError as exc:
                refused.append(exc.message)
                continue
            if done:
                cancelled.append(run)
            else:
                refused.append(f"run {run.pk} is {run.status}; only pending or running runs cancel")
        self._report(
            request, cancelled, refused, "%(count)d run cancelled", "%(count)d runs cancelled"
        )

    def _report(self, request, done, refused, singular: str, plural: str) -> None:
        if done:
            summary = ngettext(singular, plural, len(done)) % {"count": len(done)}
            states = ", ".join(f"run {run.pk} ({run.status})" for run in done)
            self.message_user(request, f"{summary}: {states}.", messages.SUCCESS)
        if refused:
            self.message_user(request, "; ".join(refused), messages.WARNING)
