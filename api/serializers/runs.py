"""Runs and their step results, as stored (inputs and outputs already redacted).

The JSON values that may be null are declared without ``allow_null``: these shapes
are only answered, never read, and drf-spectacular would describe a nullable "any
JSON" as ``oneOf: [{}, {type: null}]``, which ``null`` matches twice (invalid).
"""

from typing import Any

from rest_framework import serializers

from runs.models import Run, StepResult


class RunSerializer(serializers.ModelSerializer):
    workflow = serializers.CharField(source="workflow.name", read_only=True)
    version = serializers.IntegerField(source="workflow.version", read_only=True)
    url = serializers.SerializerMethodField()
    outputs = serializers.JSONField(help_text="Run outputs, when it succeeded; else null.")
    restarted_from = serializers.IntegerField(
        source="restarted_from_id",
        read_only=True,
        allow_null=True,
        help_text="The run this one restarts (null: not a restart).",
    )
    restarted_from_step = serializers.CharField(
        read_only=True, help_text="The step it restarted from; '' for a restart from the trigger."
    )
    restarted_from_version = serializers.IntegerField(
        source="restarted_from.workflow.version",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="The version the restarted run ran (null: not a restart); it differs from "
        "`version` for a restart onto another version.",
    )
    started_by = serializers.CharField(
        source="started_by.username",
        read_only=True,
        allow_null=True,
        default=None,
        help_text="The user who started it (null: a schedule, a webhook, the command line or "
        "a child run).",
    )
    replay_of = serializers.IntegerField(
        source="replay_of_id",
        read_only=True,
        allow_null=True,
        help_text="The validation run this replay answered from (null: not a replay).",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "url",
            "workflow",
            "version",
            "definition_hash",
            "trigger",
            "status",
            "inputs",
            "outputs",
            "error_summary",
            "created_at",
            "started_at",
            "finished_at",
            "resumed_at",
            "started_by",
            "restarted_from",
            "restarted_from_step",
            "restarted_from_version",
            "replay_of",
        ]

    def get_url(self, obj: Run) -> str:
        return f"/api/v1/runs/{obj.pk}/"


class StepResultSerializer(serializers.ModelSerializer):
    inputs = serializers.JSONField(help_text="Resolved inputs, secrets redacted (or null).")
    output = serializers.JSONField(help_text="Step output, secrets scrubbed (or null).")
    error = serializers.JSONField(help_text="{type, message, retryable}, or null.")
    attempt_log = serializers.JSONField(help_text="One entry per try.")

    class Meta:
        model = StepResult
        fields = [
            "step_id",
            "status",
            "reused",
            "attempts",
            "attempt_log",
            "inputs",
            "output",
            "output_truncated",
            "error",
            "started_at",
            "finished_at",
        ]


class RunDetailSerializer(RunSerializer):
    steps = StepResultSerializer(many=True, source="step_results")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "steps"]


class RunCreateSerializer(serializers.Serializer):
    workflow = serializers.CharField(max_length=100, help_text="The workflow's name.")
    version = serializers.IntegerField(
        required=False, min_value=1, help_text="An active version; default: the active one."
    )
    inputs = serializers.DictField(required=False, default=dict)


class JsonBooleanField(serializers.BooleanField):
    """``true`` or ``false`` as JSON: a confirmation is never read from ``"yes"`` or ``1``."""

    default_error_messages = {"invalid": "must be true or false (a JSON boolean)"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")  # raises the field's ValidationError
        return data


class RunResumeSerializer(serializers.Serializer):
    force = JsonBooleanField(
        default=False, help_text="Resume a run stuck `running` whose process died."
    )


class RunRestartSerializer(serializers.Serializer):
    from_step = serializers.CharField(
        max_length=64,
        required=False,
        allow_null=True,
        help_text="The step to run again, with every step downstream of it; every other "
        "step's result is reused. Absent or null: from the trigger (every step again). "
        "`STEP#K`: a `loop` step from its iteration K (iterations before K are reused).",
    )
    confirm = JsonBooleanField(
        default=False,
        help_text="Confirm re-running steps whose tool is not idempotent (without it such a "
        "restart is a 409 `restart_needs_confirmation` naming them).",
    )
    version = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        help_text="Restart onto this version of the run's workflow (an active one): steps "
        "changed since the run's version run again with their descendants, unchanged ones' "
        "results are reused. Absent or null: the run's own version.",
    )


class ReplayRequestSerializer(serializers.Serializer):
    validation_run = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="A validation run of this version; default: its newest succeeded one.",
    )


class StepReplaySerializer(serializers.Serializer):
    step = serializers.CharField()
    verdict = serializers.ChoiceField(choices=["matched", "differs"])
    differences = serializers.ListField(
        child=serializers.CharField(), help_text="One line per place that differs."
    )


class ReplayReportSerializer(serializers.Serializer):
    replay_run = serializers.IntegerField(help_text="The new run (trigger `replay`).")
    replay_run_url = serializers.CharField()
    validation_run = serializers.IntegerField(help_text="The run whose recordings answered.")
    matched = serializers.BooleanField(help_text="Every step matched the validation run.")
    summary = serializers.CharField()
    steps = StepReplaySerializer(many=True, help_text="In graph order.")
