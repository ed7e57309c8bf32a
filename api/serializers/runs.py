"""Runs and their step results, as stored (inputs and outputs already redacted)."""

from rest_framework import serializers

from runs.models import Run, StepResult


class RunSerializer(serializers.ModelSerializer):
    workflow = serializers.CharField(source="workflow.name", read_only=True)
    version = serializers.IntegerField(source="workflow.version", read_only=True)
    url = serializers.SerializerMethodField()

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
        ]

    def get_url(self, obj) -> str:
        return f"/api/v1/runs/{obj.pk}/"


class StepResultSerializer(serializers.ModelSerializer):
    inputs = serializers.JSONField(allow_null=True, help_text="Resolved inputs, secrets redacted.")
    output = serializers.JSONField(allow_null=True, help_text="Step output, secrets scrubbed.")
    error = serializers.JSONField(allow_null=True, help_text="{type, message, retryable}.")
    attempt_log = serializers.JSONField(help_text="One entry per try.")

    class Meta:
        model = StepResult
        fields = [
            "step_id",
            "status",
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


class RunResumeSerializer(serializers.Serializer):
    force = serializers.BooleanField(
        default=False, help_text="Resume a run stuck `running` whose process died."
    )
