"""Planner requests: asked, then polled."""

from rest_framework import serializers

from api.models import PlanRequest
from api.serializers.common import ErrorSerializer
from api.serializers.workflows import WorkflowSerializer


class PlanCreateSerializer(serializers.Serializer):
    goal = serializers.CharField(max_length=20_000)
    sample_inputs = serializers.DictField(required=False, default=dict)


class PlanRequestSerializer(serializers.ModelSerializer):
    workflow = WorkflowSerializer(allow_null=True, help_text="The version the planner stored.")
    based_on = WorkflowSerializer(allow_null=True)
    error = ErrorSerializer(allow_null=True)
    attempts = serializers.ListField(child=serializers.IntegerField())
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
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_url(self, obj) -> str:
        return f"/api/v1/plans/{obj.pk}/"
