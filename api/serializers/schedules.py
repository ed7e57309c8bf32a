"""Schedules of workflows: what the API shows, what it takes, and the fire log."""

from rest_framework import serializers

from schedules.models import Overlap, Schedule, ScheduleFire

# The largest value the schedule's positive integer columns hold on every database;
# the lower bounds are the service's (its refusal names the field).
MAX_SECONDS = 2**31 - 1


class ScheduleSerializer(serializers.ModelSerializer):
    workflow = serializers.CharField(source="workflow_name")
    interval = serializers.IntegerField(source="interval_seconds", allow_null=True)
    catchup_window = serializers.IntegerField(source="catchup_window_seconds")
    jitter = serializers.IntegerField(source="jitter_seconds")

    class Meta:
        model = Schedule
        fields = [
            "workflow",
            "name",
            "source",
            "cron",
            "timezone",
            "interval",
            "inputs",
            "overlap",
            "catchup_window",
            "pause_after_failures",
            "jitter",
            "paused",
            "paused_reason",
            "consecutive_failures",
            "last_fire_time",
            "created_at",
            "updated_at",
        ]


class ScheduleRuleSerializer(serializers.Serializer):
    """A schedule's rule, inputs and policies; ``ScheduleInvalid`` checks the rest."""

    cron = serializers.CharField(
        max_length=100, required=False, default="", allow_blank=True, help_text='"0 9 * * 1-5"'
    )
    timezone = serializers.CharField(max_length=64, default="UTC", help_text="IANA name.")
    interval = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        max_value=MAX_SECONDS,
        help_text="Seconds (instead of cron).",
    )
    inputs = serializers.DictField(required=False, default=dict, help_text="Each run's inputs.")
    overlap = serializers.ChoiceField(choices=Overlap.choices, default=Overlap.SKIP)
    catchup_window = serializers.IntegerField(
        default=3600, max_value=MAX_SECONDS, help_text="Seconds."
    )
    pause_after_failures = serializers.IntegerField(
        required=False, allow_null=True, default=None, max_value=MAX_SECONDS
    )
    jitter = serializers.IntegerField(default=0, max_value=MAX_SECONDS, help_text="Seconds.")


class ScheduleCreateSerializer(ScheduleRuleSerializer):
    workflow = serializers.CharField(max_length=100, help_text="A stored workflow's name.")
    name = serializers.CharField(max_length=100, help_text="Unique per workflow.")


class SchedulePauseSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=300, default="paused through the API")


class ScheduleFireSerializer(serializers.ModelSerializer):
    run = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    class Meta:
        model = ScheduleFire
        fields = [
            "id",
            "fire_time",
            "outcome",
            "run",
            "workflow_version",
            "delay_seconds",
            "detail",
            "created_at",
        ]
