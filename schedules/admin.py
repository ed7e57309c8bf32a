"""Admin: schedules with their fire log, the fire log itself, and the retention sweeps.

Actions call one service each. A schedule is edited here through the same service
checks as the command line (cron, timezone, interval, policies).
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

from schedules.models import RetentionSweep, Schedule, ScheduleFire
from schedules.next_fire import firing_warning, schedule_next_fire
from schedules.services import (
    Policy,
    ScheduleInvalid,
    schedule_beat_sync,
    schedule_check,
    schedule_pause,
    schedule_resume,
)
from workflows.cron import cron_describe
from workflows.models import Workflow


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = (
            "workflow_name", "name", "cron", "timezone", "interval_seconds", "inputs",
            "overlap", "catchup_window_seconds", "pause_after_failures", "jitter_seconds",
        )  # fmt: skip

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        policy = Policy(
            overlap=data.get("overlap") or "skip",
            catchup_window=data.get("catchup_window_seconds") or 0,
            pause_after_failures=data.get("pause_after_failures"),
            jitter=data.get("jitter_seconds") or 0,
        )
        try:
            data["cron"], data["timezone"], data["interval_seconds"] = schedule_check(
                cron=data.get("cron") or "",
                tz=data.get("timezone") or "",
                interval=data.get("interval_seconds"),
                policy=policy,
            )
        except ScheduleInvalid as exc:
            raise forms.ValidationError(str(exc)) from None
        name = data.get("workflow_name")
        if name and not Workflow.objects.filter(name=name).exists():
            self.add_error("workflow_name", f"no stored workflow is named {name!r}")
        return data


class FireInline(admin.TabularInline):
    model = ScheduleFire
    fields = ("fire_time", "outcome", "run", "workflow_version", "delay_seconds", "detail")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    ordering = ("-fire_time", "-id")
    show_change_link = True


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = (
        "workflow_name", "name", "described", "next_fire", "state", "overlap_short",
        "last_fire",
    )  # fmt: skip
    list_filter = ("paused", "overlap", "source")
    search_fields = ("workflow_name", "name")
    readonly_fields = (
        "source", "paused", "paused_reason", "consecutive_failures", "last_fire_time",
        "duplicates_suppressed", "periodic_task", "created_at", "updated_at",
    )  # fmt: skip
    inlines = [FireInline]
    actions = ["pause", "resume"]

    @admin.display(description="when")
    def described(self, obj: Schedule) -> str:
        """In words, with the expression and its timezone below."""
        if obj.interval_seconds:
            return f"every {obj.interval_seconds} s"
        return format_html(
            "{}<br><code class='fp-cron'>{}</code> {}",
            cron_describe(obj.cron),
            obj.cron,
            obj.timezone,
        )

    @admin.display(description="overlap", ordering="overlap")
    def overlap_short(self, obj: Schedule) -> str:
        return obj.overlap.replace("_", " ")

    @admin.display(description="last fire", ordering="last_fire_time")
    def last_fire(self, obj: Schedule) -> str:
        if obj.last_fire_time is None:
            return "never"
        zone = ZoneInfo(obj.timezone or "UTC")
        return f"{obj.last_fire_time.astimezone(zone):%Y-%m-%d %H:%M}"

    @admin.display(description="next fire")
    def next_fire(self, obj: Schedule) -> str:
        """The next fire in the schedule's timezone, and in words ("in 3 h 20 min")."""
        upcoming = schedule_next_fire(schedule=obj)
        if upcoming.at is None:
            return "-"
        return format_html(
            "<span class='fp-next-fire'>{}<br><strong>{}</strong></span>",
            upcoming.local,
            upcoming.words,
        )

    @admin.display(description="state", ordering="paused")
    def state(self, obj: Schedule) -> str:
        """``active`` or ``paused`` (with why), and failures in a row: words, not a ✔/✖ icon."""
        failures = obj.consecutive_failures
        streak = (
            f", {failures} failed run{'s' if failures != 1 else ''} in a row" if failures else ""
        )
        if obj.paused:
            return format_html(
                "<span class='fp-paused' title='{}'>paused</span>{}",
                obj.paused_reason or "",
                streak,
            )
        return f"active{streak}"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        warning = firing_warning()
        if warning and Schedule.objects.exists():
            self.message_user(request, warning, messages.WARNING)
        return super().changelist_view(request, extra_context)

    def save_model(
        self, request: HttpRequest, obj: Schedule, form: forms.ModelForm, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        schedule_beat_sync(schedule=obj)

    @admin.action(description="Pause the selected schedules")
    def pause(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        done = sum(schedule_pause(schedule=s) for s in queryset.order_by("pk"))
        self.message_user(request, f"{done} schedule(s) paused.", messages.SUCCESS)

    @admin.action(description="Resume the selected schedules")
    def resume(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        done = sum(schedule_resume(schedule=s) for s in queryset.order_by("pk"))
        self.message_user(request, f"{done} schedule(s) resumed.", messages.SUCCESS)


@admin.register(ScheduleFire)
class ScheduleFireAdmin(admin.ModelAdmin):
    list_display = ("schedule", "fire_time", "outcome", "run", "workflow_version", "created_at")
    list_select_related = ("schedule", "run__workflow")  # a run names its workflow
    list_filter = ("outcome", "schedule__workflow_name")
    search_fields = ("schedule__workflow_name", "schedule__name", "detail")
    readonly_fields = (
        "schedule", "fire_time", "outcome", "run", "workflow_version", "delay_seconds",
        "detail", "created_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(RetentionSweep)
class RetentionSweepAdmin(admin.ModelAdmin):
    list_display = ("started_at", "finished_at", "total", "batches", "error")
    readonly_fields = ("started_at", "finished_at", "removed", "total", "batches", "error")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        last = RetentionSweep.objects.order_by("-started_at", "-id").first()
        title = (
            f"Retention sweeps — last ran {last.started_at:%Y-%m-%d %H:%M} UTC"
            if last
            else ("Retention sweeps — never ran yet")
        )
        return super().changelist_view(request, {**(extra_context or {}), "title": title})
