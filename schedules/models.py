"""Schedules of workflows, the log of their fires, and the record of each retention sweep.

A schedule belongs to a workflow *name*: each fire runs the version active at that
moment, so activating a new version makes the schedule fire it and archiving the
last active one makes its fires skip. Beat learns about a schedule through the
``PeriodicTask`` row it owns (django-celery-beat's database scheduler).
"""

from django.db import models
from django_celery_beat.models import PeriodicTask

from runs.models import Run


class Overlap(models.TextChoices):
    SKIP = "skip", "Skip while a run is in flight"
    BUFFER_ONE = "buffer_one", "Buffer one fire, start it when the run ends"
    ALLOW_ALL = "allow_all", "Start every fire"


class ScheduleSource(models.TextChoices):
    DECLARED = "declared", "Declared in the workflow file"
    OPERATOR = "operator", "Added by an operator"


class Schedule(models.Model):
    workflow_name = models.CharField(max_length=100, db_index=True)
    name = models.CharField(max_length=100, help_text="Unique per workflow.")
    source = models.CharField(
        max_length=10, choices=ScheduleSource.choices, default=ScheduleSource.OPERATOR
    )
    cron = models.CharField(max_length=100, blank=True, help_text="Five-field cron expression.")
    timezone = models.CharField(max_length=64, default="UTC", help_text="IANA name.")
    interval_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Fire every N seconds (instead of a cron expression)."
    )
    inputs = models.JSONField(default=dict, blank=True, help_text="Run inputs of each fire.")
    overlap = models.CharField(max_length=12, choices=Overlap.choices, default=Overlap.SKIP)
    catchup_window_seconds = models.PositiveIntegerField(
        default=3600, help_text="A missed fire younger than this still runs (once)."
    )
    pause_after_failures = models.PositiveIntegerField(
        null=True, blank=True, help_text="Pause after this many failed runs in a row."
    )
    jitter_seconds = models.PositiveIntegerField(
        default=0, help_text="Each start is delayed by a random 0…N seconds."
    )
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=300, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_fire_time = models.DateTimeField(
        null=True, blank=True, help_text="The newest fire time handled (started or not)."
    )
    duplicates_suppressed = models.PositiveIntegerField(
        default=0, help_text="Fires of an already handled time (a second beat) ignored."
    )
    periodic_task = models.OneToOneField(
        PeriodicTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workflow_name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "name"], name="schedule_name_unique_per_workflow"
            ),
            models.CheckConstraint(
                condition=(models.Q(cron="") & models.Q(interval_seconds__gte=1))
                | (~models.Q(cron="") & models.Q(interval_seconds__isnull=True)),
                name="schedule_cron_xor_interval",
            ),
            models.CheckConstraint(
                condition=models.Q(overlap__in=[o.value for o in Overlap]),
                name="schedule_overlap_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name}/{self.name}"

    @property
    def when(self) -> str:
        if self.interval_seconds:
            return f"every {self.interval_seconds} s"
        return f"{self.cron} ({self.timezone})"


class FireOutcome(models.TextChoices):
    STARTED = "started", "Started a run"
    BUFFERED = "buffered", "Buffered behind the run in flight"
    SKIPPED_OVERLAP = "skipped_overlap", "Skipped: a run was in flight"
    SKIPPED_INACTIVE = "skipped_inactive", "Skipped: no active version"
    MISSED = "missed", "Missed: older than the catch-up window"
    NOT_STARTED = "not_started", "Not started: the run was refused"
    PAUSED = "paused", "Schedule paused"
    RESUMED = "resumed", "Schedule resumed"


# Events of the schedule itself, not fires: several may share a time.
EVENT_OUTCOMES = (FireOutcome.PAUSED, FireOutcome.RESUMED)


class ScheduleFire(models.Model):
    """One line of the fire log: a fire time and what became of it, or a pause/resume.

    The unique (schedule, fire time) constraint is the single leader: two beat
    processes (or a beat restarted mid-tick) may both send a fire, only one row (and
    so one run) per time can exist.
    """

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="fires")
    fire_time = models.DateTimeField(help_text="The time the schedule asked for.")
    outcome = models.CharField(max_length=16, choices=FireOutcome.choices)
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="schedule_fires"
    )
    workflow_version = models.PositiveIntegerField(null=True, blank=True)
    delay_seconds = models.FloatField(default=0.0, help_text="Jitter before the start.")
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-fire_time", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule", "fire_time"],
                condition=~models.Q(outcome__in=[o.value for o in EVENT_OUTCOMES]),
                name="one_fire_per_schedule_time",
            ),
        ]
        indexes = [models.Index(fields=["schedule", "outcome"], name="fire_schedule_outcome_idx")]

    def __str__(self) -> str:
        return f"{self.schedule} @ {self.fire_time:%Y-%m-%d %H:%M:%S} {self.outcome}"


class RetentionSweep(models.Model):
    """One pass of the daily retention task: when, what it removed, or why it failed."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    removed = models.JSONField(default=dict, blank=True, help_text="Runs removed per workflow.")
    total = models.PositiveIntegerField(default=0)
    batches = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"retention sweep {self.started_at:%Y-%m-%d %H:%M}"
