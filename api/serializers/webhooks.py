"""Webhook triggers: managing them, and what a delivery answers."""

from rest_framework import serializers

from api.serializers.runs import JsonBooleanField
from triggers.models import WebhookTrigger


class WebhookSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField(help_text="Where a signed POST starts a run.")

    class Meta:
        model = WebhookTrigger
        fields = ["id", "workflow_name", "url", "enabled", "created_at", "rotated_at"]

    def get_url(self, obj: WebhookTrigger) -> str:
        return f"/api/v1/hooks/{obj.public_id}/"


class WebhookSecretSerializer(WebhookSerializer):
    """The trigger with its secret: shown only when created or rotated."""

    secret = serializers.CharField(help_text="The HMAC-SHA256 key; store it now.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class WebhookCreateSerializer(serializers.Serializer):
    workflow = serializers.CharField(max_length=100, help_text="A workflow with an active version.")


class WebhookUpdateSerializer(serializers.Serializer):
    enabled = JsonBooleanField(
        required=False, help_text="`false` disables the trigger, `true` enables it; absent: kept."
    )
