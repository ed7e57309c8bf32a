"""Run admin: status, inputs, outputs, errors and a per-step timeline."""

from django.contrib import admin, messages
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import ngettext

from runs.admin_views import RunOperationViews, run_change_url
from runs.models import Run, RunTrigger, StepResult
from runs.services import run_cancel, run_repeat, run_resume
from tools.errors import FlowpilotError
from tools.jsondata import json_preview


def pretty_json(value) -> str:
    """A stored value as a capped preview: no page renders a whole multi-megabyte record."""
    if value is None:
        return "-"
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json_preview(value))


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
        "reused",
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
class RunAdmin(RunOperationViews, admin.ModelAdmin):
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
        "links",
    )
    fields = readonly_fields

    def get_urls(self):
        view = self.admin_site.admin_view
        operations = [
            path("<path:object_id>/restart/", view(self.restart_view), name="runs_run_restart"),
            path("<path:object_id>/replay/", view(self.replay_view), name="runs_run_replay"),
        ]
        return operations + super().get_urls()

    @admin.display(description="related runs")
    def links(self, obj):
        """Restarted from / restarts / replays, and the operation pages (restart, replay)."""
        parts = []
        if obj.restarted_from_id:
            where = f"step {obj.restarted_from_step}" if obj.restarted_from_step else "the trigger"
            parts.append(
                format_html(
                    'restarts <a href="{}">run {}</a> from {}',
                    reverse("admin:runs_run_change", args=[obj.restarted_from_id]),
                    obj.restarted_from_id,
                    where,
                )
            )
        restarts = list(obj.restarts.order_by("pk"))
        if restarts:
            parts.append(
                format_html(
                    "restarted as {}",
                    format_html_join(
                        ", ",
                        '<a href="{}">run {}</a>',
                        ((run_change_url(r), r.pk) for r in restarts),
                    ),
                )
            )
        if obj.replay_of_id:
            parts.append(
                format_html(
                    'replays <a href="{}">validation run {}</a> (offline, recorded responses)',
                    reverse("admin:runs_run_change", args=[obj.replay_of_id]),
                    obj.replay_of_id,
                )
            )
        parts.append(
            format_html(
                '<a class="button" id="fp-restart-link" href="{}">Restart from a step…</a>',
                reverse("admin:runs_run_restart", args=[obj.pk]),
            )
        )
        if obj.trigger == RunTrigger.VALIDATION:
            parts.append(
                format_html(
                    '<a class="button" id="fp-replay-link" href="{}">Replay offline…</a>',
                    reverse("admin:runs_run_replay", args=[obj.pk]),
                )
            )
        return format_html_join(mark_safe("<br>"), "{}", ((p,) for p in parts))

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
