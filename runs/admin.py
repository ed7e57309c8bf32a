"""Run admin: the runs list with recent-run strips, and the run page.

The run page (``runs/templates/runs/run/change_form.html``) shows the workflow graph
with each step coloured by its status (the shared ``workflows/graph.js``), a timeline
of the steps' tries and waits, each step's output as a one-line summary with its
size (the stored preview behind "show full"), errors at their step, and links to the
version, its approval and validation run (``runs.links``). While the run is active
the page polls ``<id>/status.json`` and refreshes itself in place.

The timeline and the steps show ``STEPS_PER_PAGE`` steps at a time (``?steps=2`` for
the next ones): a run of a thousand steps is a page of the usual size, not megabytes
of rows; the summary's counts and the graph cover every step. The summary says what the
run's model calls cost, and each step that called a model says its own (``runs.costs``).

The model calls themselves (``LLMCall``, the money ledger) are listed read-only, with a
summary per month and workflow (``monthly/``, linked from their list).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    JsonResponse,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.utils.translation import ngettext

from runs.admin_approvals import ApprovalRequestAdmin  # noqa: F401 - registers it
from runs.admin_views import RunOperationViews, run_change_url
from runs.costs import MonthCost, monthly_costs
from runs.links import run_links
from runs.models import LLMCall, LLMCallState, Run, RunStatus, RunTrigger, StepResult
from runs.run_view import StepView, run_status_data, run_view
from runs.selectors import run_recorded_calls, run_status_strips
from runs.services import run_cancel, run_repeat, run_resume
from runs.state import RUN_TERMINAL, StepStatus
from tools.errors import FlowpilotError
from tools.jsondata import json_preview
from tools.llm.prices import usd_text

STEPS_PER_PAGE = 100  # of the run page's timeline and steps


def pretty_json(value: Any) -> str:
    """A stored value as a capped preview: no page renders a whole multi-megabyte record."""
    if value is None:
        return "-"
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json_preview(value))


def run_link(run: Run) -> str:
    """A link to a run's admin page: ``run 12 (geo_weather v1, succeeded)``."""
    url = reverse("admin:runs_run_change", args=[run.pk])
    return format_html("<a href='{}'>run {} ({}, {})</a>", url, run.pk, run.workflow, run.status)


def child_run_links(runs: QuerySet[Run]) -> str:
    """Links to the child runs of `workflow` steps, with the step each serves."""
    rows = [(run_link(child), _step_id(child)) for child in runs]
    if not rows:
        return "-"
    return format_html_join(mark_safe("<br>"), "{} for step <code>{}</code>", rows)


def _step_id(child: Run) -> str:
    return child.parent_step.step_id if child.parent_step is not None else "?"


def duration_text(delta: timedelta | None) -> str:
    """``840 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min`` (``-`` when not finished)."""
    if delta is None:
        return "-"
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _step_row(step: StepView, recorded: list[dict] | None = None) -> dict:
    """A step of the run page with its stored records as capped previews ("show full"),
    and the calls it recorded (a validation run: ``run_recorded_calls``)."""
    result = step.result
    children = ""
    inputs = result.inputs if result is not None else None
    output = result.output if result is not None else None
    # the child runs of a `workflow` step, linked from its card
    if step.kind == "workflow" and result is not None:
        runs = result.child_runs.select_related("workflow", "parent_step").order_by("pk")
        children = child_run_links(runs)
    return {
        "step": step,
        "children": children,
        "inputs": json_preview(inputs) if inputs is not None else "",
        "output": json_preview(output) if output is not None else "",
        "error": json_preview(step.error) if step.error else "",
        "message": _message(step.error),
        "recorded": recorded or [],
    }


def _message(error: Any) -> str:
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str):
        return message if len(message) <= 2000 else message[:1999] + "…"
    return ""


class FailedSinceFilter(admin.SimpleListFilter):
    """Failed runs of the last 24 hours or 7 days: the home page's "failed today" link."""

    title = "failed recently"
    parameter_name = "failed_since"
    windows = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [("24h", "Failed in the last 24 h"), ("7d", "Failed in the last 7 days")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        window = self.windows.get(self.value() or "")
        if window is None:
            return queryset
        return queryset.filter(status=RunStatus.FAILED, created_at__gte=timezone.now() - window)


class WorkflowNameFilter(admin.SimpleListFilter):
    """Runs of one workflow, every version (the status strips link here)."""

    title = "workflow"
    parameter_name = "workflow__name"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        names = Run.objects.order_by("workflow__name").values_list("workflow__name", flat=True)
        return [(name, name) for name in names.distinct()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Run]) -> QuerySet[Run]:
        return queryset.filter(workflow__name=self.value()) if self.value() else queryset


@admin.register(Run)
class RunAdmin(RunOperationViews):
    change_form_template = "runs/run/change_form.html"
    change_list_template = "runs/run/change_list.html"
    list_display = ("id", "workflow", "status_badge", "failure", "source", "created", "took")
    list_display_links = ("id", "workflow")
    list_filter = (FailedSinceFilter, "status", "trigger", WorkflowNameFilter)
    list_select_related = ("workflow", "parent_run__workflow", "parent_step", "started_by")
    search_fields = ("workflow__name", "error_summary")
    date_hierarchy = "created_at"
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
        "parent",
        "children",
    )
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "workflow",
                    "trigger",
                    "status",
                    "error_summary",
                    "links",
                    "parent",
                    "children",
                )
            },
        ),
        (
            "Inputs and outputs",
            {"classes": ("collapse",), "fields": ("pretty_inputs", "pretty_outputs")},
        ),
        (
            "Record",
            {
                "classes": ("collapse",),
                "fields": ("definition_hash", "created_at", "started_at", "finished_at", "took"),
            },
        ),
    )

    @admin.display(description="related runs")
    def links(self, obj: Run) -> str:
        """Restarted from / restarts / replays, and the operation pages (restart, replay)."""
        parts = []
        if (original := obj.restarted_from) is not None:
            where = f"step {obj.restarted_from_step}" if obj.restarted_from_step else "the trigger"
            onto = ""
            if original.workflow_id != obj.workflow_id:
                onto = f", onto v{obj.workflow.version}"
            parts.append(
                format_html(
                    'restarts <a href="{}">run {}</a> of {} from {}{}',
                    reverse("admin:runs_run_change", args=[original.pk]),
                    original.pk,
                    original.workflow,
                    where,
                    onto,
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
                    'replays <a href="{}">{} {}</a> (offline, recorded responses)',
                    reverse("admin:runs_run_change", args=[obj.replay_of_id]),
                    # a replay child replays the validation run's child run of its step
                    "validation run" if obj.parent_run_id is None else "recorded child run",
                    obj.replay_of_id,
                )
            )
        if not parts:
            return "-"
        return format_html_join(mark_safe("<br>"), "{}", ((p,) for p in parts))

    @admin.display(description="parent run")
    def parent(self, obj: Run) -> str:
        """The run whose `workflow` step started this one (a child run)."""
        if obj.parent_run is None:
            return "-"
        return format_html("{}, step <code>{}</code>", run_link(obj.parent_run), _step_id(obj))

    @admin.display(description="child runs")
    def children(self, obj: Run) -> str:
        """The runs its `workflow` steps started."""
        runs = obj.child_runs.select_related("workflow", "parent_step").order_by("pk")
        return child_run_links(runs)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        failing = StepResult.objects.filter(run=OuterRef("pk"), status=StepStatus.FAILED)
        return (
            super()
            .get_queryset(request)
            .annotate(
                failing_step=Subquery(failing.order_by("finished_at", "pk").values("step_id")[:1])
            )
        )

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Run) -> str:
        """``2026-11-27 04:30`` (local time of the site), one line."""
        return f"{timezone.localtime(obj.created_at):%Y-%m-%d %H:%M}"

    @admin.display(description="duration")
    def took(self, obj: Run) -> str:
        return duration_text(obj.duration)

    @admin.display(description="failing step · error")
    def failure(self, obj: Run) -> str:
        """The step that failed and the error's first line, cut to fit a row."""
        step = getattr(obj, "failing_step", None)
        if not step and not obj.error_summary:
            return "-"
        summary = (obj.error_summary or "").strip().splitlines()[0] if obj.error_summary else ""
        short = summary if len(summary) <= 140 else summary[:139] + "…"
        return format_html(
            "<span class='fp-failure-cell'>{}"
            "<span class='fp-failure-text' title='{}'>{}</span></span>",
            format_html("<code>{}</code> ", step) if step else "",
            summary,
            short,
        )

    @admin.display(description="trigger · started by", ordering="trigger")
    def source(self, obj: Run) -> str:
        """How it started: the trigger, and for a child run the run and step that started it."""
        if obj.parent_run is not None:
            return format_html(
                "child of {}, step <code>{}</code>", run_link(obj.parent_run), _step_id(obj)
            )
        by = f" · by {obj.started_by.get_username()}" if obj.started_by is not None else ""
        if obj.restarted_from_id:
            return f"{obj.get_trigger_display()} · restart of run {obj.restarted_from_id}{by}"
        return f"{obj.get_trigger_display()}{by}"

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Run) -> str:
        return format_html(
            "<span class='fp-run-status fp-run-{}' data-status='{}'>{}</span>",
            obj.status,
            obj.status,
            obj.get_status_display(),
        )

    # --- the run page and its status JSON -----------------------------------------

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        own = [
            path("<path:object_id>/status.json", view(self.status_view), name=f"{name}_status"),
            path("<path:object_id>/restart/", view(self.restart_view), name=f"{name}_restart"),
            path("<path:object_id>/replay/", view(self.replay_view), name=f"{name}_replay"),
            path(
                "<path:object_id>/do/<str:operation>/",
                view(self.operation_view),
                name=f"{name}_operation",
            ),
        ]
        return own + super().get_urls()

    def operation_view(self, request: HttpRequest, object_id: str, operation: str) -> HttpResponse:
        """POST from the run page's buttons: resume, run again or cancel this run.

        The service checks the actor's ``runs.operate_run`` as the API's does; a refusal
        is shown on the run page, nothing changed."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        run = self._run(request, object_id)
        try:
            if operation == "resume":
                done = run_resume(run=run, actor=request.user)
                text = f"Run {run.pk} resumed from its checkpoint: {done.status}."
            elif operation == "again":
                done = run_repeat(run=run, trigger=RunTrigger.MANUAL, actor=request.user)
                self.message_user(
                    request, f"Run {done.pk} started again from run {run.pk}: {done.status}."
                )
                return HttpResponseRedirect(run_change_url(done))
            elif operation == "cancel":
                if not run_cancel(run=run, actor=request.user):
                    raise FlowpilotError(
                        f"run {run.pk} is {run.status}; only queued, pending or running runs cancel"
                    )
                text = f"Run {run.pk} cancelled: queued steps never start."
            else:
                raise Http404(f"no run operation {operation!r}")
        except FlowpilotError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(run_change_url(run))

    def status_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The run's status and its steps', polled by the run page while it is active."""
        run = self.get_object(request, object_id)
        if run is None:
            raise Http404(f"no run {object_id}")
        if not self.has_view_permission(request, run):
            raise PermissionDenied
        return JsonResponse(run_status_data(run_view(run=run, costs=False)))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if run is not None and self.has_view_permission(request, run):
            view = run_view(run=run)
            recorded = run_recorded_calls(run=run)
            page = Paginator(view.steps, STEPS_PER_PAGE).get_page(request.GET.get("steps"))
            extra.update(
                run_page=view,
                run_state=run_status_data(view),
                steps_page=page,
                step_rows=[_step_row(step, recorded.get(step.step_id)) for step in page],
                run_links=run_links(run=run),
                run_buttons=self.run_buttons(request, run),
                title=f"Run {run.pk} of {run.workflow.name} v{run.workflow.version}",
                subtitle=None,  # the title names the run once
            )
        return super().change_view(request, object_id, form_url, extra)

    def run_buttons(self, request: HttpRequest, run: Run) -> list[dict[str, str]]:
        """The operations that apply to this run, as buttons (POST forms or pages).

        Shown to users who may operate runs; the services check again on POST."""
        buttons: list[dict[str, str]] = []
        if not self.has_operate_permission(request):
            return buttons

        def post(operation: str, label: str, help_text: str) -> dict[str, str]:
            url = reverse("admin:runs_run_operation", args=[run.pk, operation])
            return {
                "id": operation,
                "label": label,
                "url": url,
                "method": "post",
                "help": help_text,
            }

        if run.status in {RunStatus.FAILED, RunStatus.CANCELLED}:
            buttons.append(
                post("resume", "Resume", "from the checkpoint: succeeded steps are kept")
            )
        active = {RunStatus.QUEUED, RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING}
        if run.status in active:
            buttons.append(
                post("cancel", "Cancel", "queued steps never start; steps in flight finish")
            )
        if run.status in RUN_TERMINAL:
            buttons.append(
                post("again", "Run again", "a new run of this version with the same inputs")
            )
            buttons.append(
                {
                    "id": "restart",
                    "label": "Restart from a step…",
                    "url": reverse("admin:runs_run_restart", args=[run.pk]),
                    "method": "get",
                    "help": "a new run that reuses the outputs before the chosen step",
                }
            )
        if run.trigger == RunTrigger.VALIDATION:
            buttons.append(
                {
                    "id": "replay",
                    "label": "Replay offline…",
                    "url": reverse("admin:runs_run_replay", args=[run.pk]),
                    "method": "get",
                    "help": "answer every call from this validation run's recordings",
                }
            )
        return buttons

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {
            "status_strips": run_status_strips(),
            "strip_legend": [s.value for s in RunStatus],
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra)

    @admin.display(description="inputs")
    def pretty_inputs(self, obj: Run) -> str:
        return pretty_json(obj.inputs)

    @admin.display(description="outputs")
    def pretty_outputs(self, obj: Run) -> str:
        return pretty_json(obj.outputs)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False  # run history is a record; it changes only through services

    # --- actions: each calls one service and reports what it did -----------------

    actions = ["run_again", "resume_runs", "cancel_runs"]

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("runs.operate_run")

    @admin.action(
        description="Run again (same version and inputs; on the workers if configured)",
        permissions=["operate"],
    )
    def run_again(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        started, refused = [], []
        for run in queryset.select_related("workflow").order_by("pk"):
            try:
                started.append(run_repeat(run=run, trigger=RunTrigger.MANUAL, actor=request.user))
            except FlowpilotError as exc:
                refused.append(f"run {run.pk}: {exc.message}")
        self._report(
            request, started, refused, "%(count)d new run started", "%(count)d new runs started"
        )

    @admin.action(
        description="Resume from the checkpoint (failed or cancelled runs)",
        permissions=["operate"],
    )
    def resume_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
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
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
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
                refused.append(
                    f"run {run.pk} is {run.status}; only queued, pending or running runs cancel"
                )
        self._report(
            request, cancelled, refused, "%(count)d run cancelled", "%(count)d runs cancelled"
        )

    def _report(
        self,
        request: HttpRequest,
        done: list[Run],
        refused: list[str],
        singular: str,
        plural: str,
    ) -> None:
        if done:
            summary = ngettext(singular, plural, len(done)) % {"count": len(done)}
            states = ", ".join(f"run {run.pk} ({run.status})" for run in done)
            self.message_user(request, f"{summary}: {states}.", messages.SUCCESS)
        if refused:
            self.message_user(request, "; ".join(refused), messages.WARNING)


def month_row(row: MonthCost) -> dict[str, Any]:
    """One line of the monthly summary, with a link to its calls in the list."""
    cost = row.cost
    notes = []
    if cost.unpriced_calls:
        notes.append(f"{cost.unpriced_calls} at a model with no price")
    if cost.in_flight:
        notes.append(f"{cost.in_flight} in flight, at their estimate")
    if cost.estimated_calls:
        notes.append(f"{cost.estimated_calls} charged at their estimate")
    query: dict[str, str | int] = {
        "workflow_name": row.workflow,
        "created_at__year": row.month.year,
        "created_at__month": row.month.month,
    }
    return {
        "month": f"{row.month:%Y-%m}",
        "workflow": row.workflow,
        "calls": f"{cost.calls:,}",
        "prompt_tokens": f"{cost.prompt_tokens:,}",
        "completion_tokens": f"{cost.completion_tokens:,}",
        "usd": cost.usd_text(),
        "usd_exact": cost.usd_text(None),
        "notes": "; ".join(notes),
        "calls_url": f"{reverse('admin:runs_llmcall_changelist')}?{urlencode(query)}",
    }


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    """The money ledger: one row per model call, read-only (the engine writes it,
    ``runs.engine.spend``), and a summary per month and workflow (``monthly/``)."""

    change_list_template = "runs/llmcall/change_list.html"
    monthly_template = "runs/llmcall/monthly.html"
    list_display = (
        "created_at",
        "workflow_name",
        "step_id",
        "run_cell",
        "model",
        "state",
        "tokens",
        "cost",
    )
    list_filter = ("workflow_name", "state", "kind", "endpoint")
    list_select_related = ("run__workflow",)
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")  # newest first

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: LLMCall | None = None) -> bool:
        return False  # a record of money spent; only the engine writes it

    def has_delete_permission(self, request: HttpRequest, obj: LLMCall | None = None) -> bool:
        return False  # a month's budget is counted from these rows

    @admin.display(description="run")
    def run_cell(self, obj: LLMCall) -> str:
        return run_link(obj.run) if obj.run is not None else "-"

    @admin.display(description="tokens (prompt + completion)")
    def tokens(self, obj: LLMCall) -> str:
        return f"{obj.prompt_tokens:,} + {obj.completion_tokens:,}"

    @admin.display(description="cost (USD)", ordering="cost_pico")
    def cost(self, obj: LLMCall) -> str:
        """Exact; a reserved call's is its estimate; "no price" for an unpriced model."""
        if obj.cost_pico is None:
            return "no price"
        text = f"${usd_text(obj.cost_pico)}"
        return f"{text} (estimate)" if obj.state == LLMCallState.RESERVED else text

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        own = [path("monthly/", view(self.monthly_view), name=f"{name}_monthly")]
        return own + super().get_urls()

    def monthly_view(self, request: HttpRequest) -> HttpResponse:
        """Per month and workflow, newest month first: calls, tokens and cost;
        ``?workflow=NAME`` shows one workflow's months."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        workflow = request.GET.get("workflow", "").strip()
        names = LLMCall.objects.order_by("workflow_name").values_list("workflow_name", flat=True)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Model calls per month",
            "workflow": workflow,
            "workflows": list(names.distinct()),
            "rows": [month_row(row) for row in monthly_costs(workflow=workflow or None)],
        }
        return TemplateResponse(request, self.monthly_template, context)
