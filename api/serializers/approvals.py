"""Approval requests of ``approval`` steps, and deciding them."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from runs.approvals import approval_refusal
from runs.models import ApprovalDecision, ApprovalRequest


class ApprovalDecisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApprovalDecision
        fields = ["username", "approved", "values", "comment", "preview_hash", "via", "created_at"]


class ApprovalSerializer(serializers.ModelSerializer):
    workflow = serializers.CharField(source="run.workflow.name")
    version = serializers.IntegerField(source="run.workflow.version")
    author = serializers.CharField(source="author.username", allow_null=True, default=None)
    approvals_given = serializers.SerializerMethodField()
    decisions = ApprovalDecisionSerializer(many=True, read_only=True)
    refusal = serializers.SerializerMethodField(
        help_text="Why the requesting user may not decide it now (null: they may)."
    )

    class Meta:
        model = ApprovalRequest
        fields = [
            "id", "run", "workflow", "version", "step_id", "status", "approvers", "required",
            "approvals_given", "author_may_approve", "author", "form", "preview",
            "preview_hash", "expires_at", "on_timeout", "output", "message", "created_at",
            "decided_at", "decisions", "refusal",
        ]  # fmt: skip

    def get_approvals_given(self, obj: ApprovalRequest) -> int:
        return sum(1 for d in obj.decisions.all() if d.approved)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_refusal(self, obj: ApprovalRequest) -> str | None:
        if obj.status != "pending":
            return f"it is {obj.status}"
        user = self.context.get("user") or getattr(self.context.get("request"), "user", None)
        return approval_refusal(obj, user)


class ApproveSerializer(serializers.Serializer):
    values = serializers.DictField(
        required=False, default=dict, help_text="The form's values (checked against it)."
    )
    comment = serializers.CharField(required=False, default="", max_length=2000, allow_blank=True)
    preview_hash = serializers.CharField(
        required=False,
        default="",
        max_length=64,
        allow_blank=True,
        help_text="The preview you were shown (`preview_hash`): refused when it is not this "
        "request's.",
    )


class RejectSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, default="", max_length=2000, allow_blank=True)
    preview_hash = serializers.CharField(
        required=False, default="", max_length=64, allow_blank=True
    )
