"""Planner requests: asked, then polled."""

from typing import Any

from rest_framework import serializers

from api.serializers.common import ErrorSerializer
from api.serializers.workflows import WorkflowSerializer
from review.models import PlanRequest


class PlanCreateSerializer(serializers.Serializer):
    goal = serializers.CharField(max_length=20_000, required=False, default="")  # or answers_to
    sample_inputs = serializers.DictField(required=False, default=dict)
    answers_to = serializers.IntegerField(
        min_value=1,
        max_value=2**63 - 1,
        required=False,
        allow_null=True,
        default=None,
        help_text="A plan request's `question_attempt`: answer its questions instead of a goal.",
    )
    answers = serializers.DictField(
        child=serializers.CharField(max_length=1000, allow_blank=True),
        required=False,
        default=dict,
        help_text="Question id (or 1-based number) -> answer; an unanswered one: no preference.",
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data["answers_to"] is None and not data["goal"].strip():
            raise serializers.ValidationError({"goal": "a goal is needed (or answers_to)"})
        return data


class QuestionSerializer(serializers.Serializer):
    id = serializers.CharField()
    question = serializers.CharField()
    options = serializers.ListField(child=serializers.CharField())


class PlanRequestSerializer(serializers.ModelSerializer):
    workflow = WorkflowSerializer(allow_null=True, help_text="The version the planner stored.")
    based_on = WorkflowSerializer(allow_null=True)
    error = ErrorSerializer(allow_null=True)
    attempts = serializers.ListField(child=serializers.IntegerField())
    questions = QuestionSerializer(many=True, help_text="The planner's questions, if it asked.")
    question_attempt = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True, help_text="Send this as `answers_to` with your `answers`."
    )
    answers_to = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = PlanRequest
        fields = [
            "id",
            "url",
            "kind",
            "status",
            "goal",
            "sample_inputs",
            "feedback",
            "based_on",
            "workflow",
            "attempts",
            "questions",
            "question_attempt",
            "answers_to",
            "answers",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_url(self, obj: PlanRequest) -> str:
        return f"/api/v1/plans/{obj.pk}/"
