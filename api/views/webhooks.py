"""Webhook triggers: manage them (create, rotate, enable, delete) and receive deliveries."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from api.selectors import webhook_list
from api.serializers.runs import RunSerializer
from api.serializers.webhooks import (
    WebhookCreateSerializer,
    WebhookSecretSerializer,
    WebhookSerializer,
    WebhookUpdateSerializer,
)
from triggers.webhooks import (
    webhook_create,
    webhook_deliver,
    webhook_rotate,
    webhook_set_enabled,
)


class WebhookViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = WebhookSerializer
    required_perms = {
        "list": ["triggers.view_webhooktrigger"],
        "retrieve": ["triggers.view_webhooktrigger"],
        "create": ["triggers.view_webhooktrigger", "triggers.add_webhooktrigger"],
        "partial_update": ["triggers.view_webhooktrigger", "triggers.change_webhooktrigger"],
        "rotate": ["triggers.view_webhooktrigger", "triggers.change_webhooktrigger"],
        "destroy": ["triggers.view_webhooktrigger", "triggers.delete_webhooktrigger"],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return webhook_list()

    @extend_schema(request=WebhookCreateSerializer, responses={201: WebhookSecretSerializer})
    def create(self, request: Request) -> Response:
        """A trigger URL and secret for a workflow with an active version (shown once)."""
        params = WebhookCreateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        trigger = webhook_create(workflow_name=params.validated_data["workflow"], user=request.user)
        return Response(WebhookSecretSerializer(trigger).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=WebhookUpdateSerializer, responses={200: WebhookSerializer})
    def partial_update(self, request: Request, pk: str) -> Response:
        params = WebhookUpdateSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        trigger = self.get_object()
        if "enabled" in params.validated_data:  # a PATCH changes what it names, nothing else
            trigger = webhook_set_enabled(trigger=trigger, **params.validated_data)
        return Response(WebhookSerializer(trigger).data)

    @extend_schema(request=None, responses={200: WebhookSecretSerializer})
    def rotate(self, request: Request, pk: str) -> Response:
        """A new URL and secret; the old URL and signatures are refused from now on."""
        trigger = webhook_rotate(trigger=self.get_object())
        return Response(WebhookSecretSerializer(trigger).data)


class HookView(viewsets.ViewSet):
    """The trigger URL. Authenticated by its signature, not by a user.

    Throttled by its own limit only (``FLOWPILOT_API_THROTTLE_WEBHOOK`` per address):
    with the anonymous throttle too, deliveries were refused at the anonymous rate and
    used up the address's allowance for the rest of the API.
    """

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "webhook"

    @extend_schema(
        request={"application/json": {"type": "object", "additionalProperties": True}},
        parameters=[
            OpenApiParameter(
                "X-Flowpilot-Timestamp",
                str,
                OpenApiParameter.HEADER,
                required=True,
                description="Unix seconds when signed.",
            ),
            OpenApiParameter(
                "X-Flowpilot-Signature",
                str,
                OpenApiParameter.HEADER,
                required=True,
                description='"sha256=" + hex HMAC-SHA256 of '
                '"{timestamp}." + body, keyed with the trigger\'s secret.',
            ),
        ],
        responses={202: RunSerializer},
        auth=[],
    )
    def deliver(self, request: Request, public_id: str) -> Response:
        """Start a run of the active version with the JSON body as its inputs."""
        run = webhook_deliver(
            public_id=public_id,
            timestamp=request.headers.get("X-Flowpilot-Timestamp"),
            signature=request.headers.get("X-Flowpilot-Signature"),
            body=request.body,
        )
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
