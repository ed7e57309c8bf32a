"""Event and poll triggers, and the events they took (read-only: a trigger is part of a
workflow's approved definition)."""

from rest_framework import serializers

from triggers.models import EventTrigger, TriggerEvent


class EventTriggerSerializer(serializers.ModelSerializer):
    workflow = serializers.CharField(source="workflow_name", help_text="The waiting workflow.")
    source = serializers.CharField(
        help_text="on_workflow: the workflow whose finished runs start it; poll: the tool."
    )
    statuses = serializers.SerializerMethodField(
        help_text="on_workflow: the ends it waits for; poll: empty."
    )

    class Meta:
        model = EventTrigger
        fields = [
            "id", "workflow", "position", "kind", "source", "statuses", "every_seconds",
            "next_poll_at", "polled_at", "last_error", "cursor", "cursor_version", "created_at",
        ]  # fmt: skip

    def get_statuses(self, obj: EventTrigger) -> list[str]:
        return [s for s in obj.statuses.split(",") if s] if obj.kind == "on_workflow" else []


class TriggerEventSerializer(serializers.ModelSerializer):
    workflow = serializers.CharField(source="workflow_name", help_text="The triggered workflow.")
    source_run = serializers.IntegerField(
        source="source_run_id", allow_null=True, help_text="on_workflow: the finished run."
    )
    run = serializers.IntegerField(
        source="run_id", allow_null=True, help_text="The run it started (null: refused)."
    )

    class Meta:
        model = TriggerEvent
        fields = [
            "id", "workflow", "position", "event_key", "source_run", "source_finished_at",
            "run", "outcome", "message", "chain", "created_at",
        ]  # fmt: skip
