"""Tools as the API shows them, and the load request."""

from rest_framework import serializers

from api.serializers.runs import JsonBooleanField
from tools.models import Tool
from tools.pins import tool_current_version


class ToolSerializer(serializers.ModelSerializer):
    class Meta:
        model = Tool
        fields = ["name", "kind", "description", "enabled", "source", "updated_at"]


class ToolDetailSerializer(serializers.ModelSerializer):
    input_schema = serializers.JSONField(help_text="JSON Schema of the tool's inputs.")
    outputs = serializers.ListField(child=serializers.CharField())
    version = serializers.SerializerMethodField(
        help_text="The semantic version of the definition the tool has now (null when it was "
        "never recorded)."
    )

    class Meta:
        model = Tool
        fields = [*ToolSerializer.Meta.fields, "input_schema", "outputs", "version"]

    def get_version(self, tool: Tool) -> str | None:
        return tool_current_version(tool=tool)


class ToolChangeSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Where: input_schema.properties.state.enum, http.auth…")
    what = serializers.CharField(help_text="What changed, in words.")
    level = serializers.ChoiceField(choices=["major", "minor", "patch"])


class ToolVersionSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="1 for the first definition, one more per change.")
    version = serializers.CharField(help_text="Semantic version, computed from what changed.")
    bump = serializers.CharField(help_text="major, minor or patch since the one before ('' first).")
    hash = serializers.CharField(help_text="sha256 of the definition (what a version pins).")
    source = serializers.CharField()
    created_at = serializers.DateTimeField()
    changes = ToolChangeSerializer(many=True, help_text="What changed since the one before.")


class VersionRefSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    version = serializers.CharField()


class ToolVersionsDiffQuerySerializer(serializers.Serializer):
    a = serializers.CharField(max_length=32, help_text="A version: its number or semver.")
    b = serializers.CharField(max_length=32, help_text="Another: its number or semver.")


class ToolVersionsDiffSerializer(serializers.Serializer):
    tool = serializers.CharField()
    to = VersionRefSerializer()
    bump = serializers.CharField(help_text="The biggest change ('' for the same definition).")
    changes = ToolChangeSerializer(many=True)
    diff = serializers.CharField(help_text="The two definitions as a unified diff of their JSON.")

    def get_fields(self) -> dict[str, serializers.Field]:
        # ``from`` is a Python keyword: the field is added here, not declared.
        fields = super().get_fields()
        return {"tool": fields.pop("tool"), "from": VersionRefSerializer(), **fields}


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
