"""Tools as the API shows them, and the load request."""

from rest_framework import serializers

from api.serializers.runs import JsonBooleanField
from tools.models import Tool


class ToolSerializer(serializers.ModelSerializer):
    class Meta:
        model = Tool
        fields = ["name", "kind", "description", "enabled", "source", "updated_at"]


class ToolDetailSerializer(serializers.ModelSerializer):
    input_schema = serializers.JSONField(help_text="JSON Schema of the tool's inputs.")
    outputs = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Tool
        fields = [*ToolSerializer.Meta.fields, "input_schema", "outputs"]


class ToolLoadSerializer(serializers.Serializer):
    directory = serializers.CharField(
        max_length=1000,
        help_text="A directory (or file) of tool YAML, inside FLOWPILOT_API_TOOL_DIRS.",
    )
    sync_builtin = JsonBooleanField(default=True)


class LoadedToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.CharField()
    action = serializers.ChoiceField(choices=["created", "updated", "unchanged"])
    source = serializers.CharField()


class LoadErrorSerializer(serializers.Serializer):
    source = serializers.CharField()
    message = serializers.CharField()


class ToolLoadReportSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    tools = LoadedToolSerializer(many=True)
    errors = LoadErrorSerializer(many=True)
