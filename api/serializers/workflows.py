"""Workflow versions, their graph and validation, and the design-phase requests."""

from typing import Any

from rest_framework import serializers

from workflows.models import Workflow
from workflows.versions import CREATABLE_STATUSES


class WorkflowSerializer(serializers.ModelSerializer):
    class Meta:
        model = Workflow
        fields = [
            "id",
            "name",
            "version",
            "status",
            "description",
            "goal",
            "definition_hash",
            "created_at",
            "updated_at",
            "approved_at",
        ]


class NodeSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    tool = serializers.CharField(allow_blank=True)
    name = serializers.CharField(allow_blank=True)
    description = serializers.CharField(allow_blank=True)
    branches = serializers.ListField(child=serializers.CharField())


# "from" is a Python keyword: the fields are given as a mapping.
EdgeSerializer = type(
    "EdgeSerializer",
    (serializers.Serializer,),
    {
        "from": serializers.CharField(),
        "to": serializers.CharField(),
        "when": serializers.CharField(allow_blank=True),
        "inferred": serializers.BooleanField(),
    },
)


class GraphSerializer(serializers.Serializer):
    nodes = NodeSerializer(many=True)
    edges = EdgeSerializer(many=True)


class IssueSerializer(serializers.Serializer):
    code = serializers.CharField()
    path = serializers.CharField(allow_blank=True, help_text="JSON path, e.g. `steps[2].tool`.")
    message = serializers.CharField()
    severity = serializers.ChoiceField(choices=["error", "warning"])
    step_id = serializers.CharField(allow_null=True)


class ValidationSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    issues = IssueSerializer(many=True)


class WorkflowDetailSerializer(WorkflowSerializer):
    definition = serializers.JSONField(help_text="The whole workflow in the file form (frozen).")
    graph = GraphSerializer()
    validation = ValidationSerializer(help_text="The validator's report against today's tools.")

    class Meta(WorkflowSerializer.Meta):
        fields = [*WorkflowSerializer.Meta.fields, "definition", "graph", "validation"]


class DefinitionSerializer(serializers.Serializer):
    """A definition as a JSON object, or the text of a workflow file (YAML or JSON)."""

    definition = serializers.DictField(required=False, help_text="The workflow as an object.")
    source = serializers.CharField(
        required=False,
        max_length=1_000_000,
        trim_whitespace=False,
        help_text="The text of a workflow file, YAML or JSON.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("definition" in attrs) == ("source" in attrs):
            raise serializers.ValidationError("give exactly one of `definition` and `source`")
        return attrs


class WorkflowCreateSerializer(DefinitionSerializer):
    status = serializers.ChoiceField(
        choices=[str(s) for s in CREATABLE_STATUSES],
        default="draft",
        help_text="`pending_review` submits the version for review (approve it next).",
    )


class ExportSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField()
    definition = serializers.JSONField()
    yaml = serializers.CharField(help_text="The same definition as a YAML file.")


class ApproveSerializer(serializers.Serializer):
    sample_inputs = serializers.DictField(
        required=False, default=dict, help_text="Inputs of the validation run."
    )


class RunLinkSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    url = serializers.CharField()


class ApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(
        choices=["pending", "validating", "passed", "failed"],
        help_text="`pending`: recorded, the approval policy needs more approvers before "
        "the validation run starts.",
    )
    workflow = WorkflowSerializer()
    validation_run = RunLinkSerializer(allow_null=True)
    approvals_given = serializers.IntegerField(
        help_text="Distinct approvals that count for this definition hash."
    )
    approvals_required = serializers.IntegerField(help_text="Distinct approvals the policy needs.")
    approvers = serializers.ListField(child=serializers.CharField())


class FeedbackSerializer(serializers.Serializer):
    feedback = serializers.CharField(max_length=20_000)


class ScenarioResultSerializer(serializers.Serializer):
    scenario = serializers.CharField(help_text="The test scenario's name (`tests:`).")
    status = serializers.ChoiceField(
        choices=["passed", "failed", "error", "skipped", "not_run"],
        help_text="Its newest result for this version's definition; not_run: never run.",
    )
    failures = serializers.ListField(
        child=serializers.CharField(), help_text="Each unmet expectation, or why it could not run."
    )
    run = serializers.IntegerField(allow_null=True, help_text="The replay run that played it.")
    validation_run = serializers.IntegerField(
        allow_null=True, help_text="The validation run whose recorded calls answered it."
    )
    created_at = serializers.DateTimeField(allow_null=True)


class ScenarioResultsSerializer(serializers.Serializer):
    version = serializers.IntegerField(help_text="The version number.")
    scenarios = ScenarioResultSerializer(many=True, help_text="In the order they are written.")
