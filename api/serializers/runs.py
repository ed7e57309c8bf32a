"""Runs and their step results, as stored (inputs and outputs already redacted).

The JSON values that may be null are declared without ``allow_null``: these shapes
are only answered, never read, and drf-spectacular would describe a nullable "any
JSON" as ``oneOf: [{}, {type: null}]``, which ``null`` matches twice (invalid).

``llm_cost`` is what the model calls cost (``runs.costs``): a run's, read for a page of
runs at once when the view hands ``run_costs`` in the context (a list), else for the one
run; and each step's, read once for the run's steps.
"""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.costs import Cost, run_cost, step_costs
from runs.models import Run, StepResult


class LLMCostSerializer(serializers.Serializer):
    """``Cost.as_dict()``: the model calls summed, the amount exact."""

    usd = serializers.CharField(
        help_text="US dollars, exact, as decimal text (`0.00045`; `0` when nothing was spent)."
    )
    calls = serializers.IntegerField(help_text="Model calls made.")
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    unpriced_calls = serializers.IntegerField(
        help_text="Calls answered by a model with no price: their tokens count, not in `usd`."
    )
    in_flight = serializers.IntegerField(
        help_text="Calls not answered yet: in `usd` at their estimate."
    )
    estimated_calls = serializers.IntegerField(
        help_text="Calls charged at their estimate: the answer reported no usage, or no "
        "answer came to a call that may have been processed (a timeout)."
    )


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
    llm_cost = serializers.SerializerMethodField()

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
            "llm_cost",
        ]

    def get_url(self, obj: Run) -> str:
        return f"/api/v1/runs/{obj.pk}/"

    @extend_schema_field(
        LLMCostSerializer(help_text="What the run's model calls cost (all zero: none).")
    )
    def get_llm_cost(self, obj: Run) -> dict[str, Any]:
        page = self.context.get("run_costs")
        cost = page.get(obj.pk, Cost()) if page is not None else run_cost(obj.pk)
        return cost.as_dict()


class StepResultSerializer(serializers.ModelSerializer):
    inputs = serializers.JSONField(help_text="Resolved inputs, secrets redacted (or null).")
    output = serializers.JSONField(help_text="Step output, secrets scrubbed (or null).")
    error = serializers.JSONField(help_text="{type, message, retryable}, or null.")
    attempt_log = serializers.JSONField(help_text="One entry per try.")
    llm_cost = serializers.SerializerMethodField()

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
            "llm_cost",
        ]

    @extend_schema_field(
        LLMCostSerializer(
            allow_null=True, help_text="What the step's model calls cost (null: it called none)."
        )
    )
    def get_llm_cost(self, obj: StepResult) -> dict[str, Any] | None:
        cost = self.context.get("step_costs", {}).get(obj.step_id)
        return cost.as_dict() if cost is not None else None


class RunDetailSerializer(RunSerializer):
    steps = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "steps"]

    @extend_schema_field(StepResultSerializer(many=True))
    def get_steps(self, obj: Run) -> list[dict[str, Any]]:
        """The step results (prefetched), each with its cost: one query for every step's."""
        context = {**self.context, "step_costs": step_costs(obj.pk)}
        return StepResultSerializer(obj.step_results.all(), many=True, context=context).data


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
