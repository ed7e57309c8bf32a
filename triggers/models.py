"""Webhook triggers and their deliveries: a signed POST starts a run.

The tables keep the names they had when the REST API owned these models
(``api_webhooktrigger``, ``api_webhookdelivery``): moving them changed no rows.
Relations to the layers below use ``related_name="+"``: a lower layer never reaches
these tables (the layering rule in ``pyproject.toml``).
"""

from django.conf import settings
from django.db import models

from runs.models import Run


class WebhookTrigger(models.Model):
    """A URL that starts a run of the active version of ``workflow_name``.

    ``public_id`` is the URL's last segment and ``secret`` the HMAC key; rotating
    replaces both and keeps the replaced pair in ``previous_*``, accepted until
    ``FLOWPILOT_WEBHOOK_ROTATION_OVERLAP`` seconds after ``rotated_at`` so senders can
    switch without a gap. The secrets are kept as is (verifying an HMAC needs them)
    and shown only when created or rotated.
    """

    workflow_name = models.CharField(max_length=100, unique=True)
    public_id = models.CharField(max_length=64, unique=True)
    secret = models.CharField(max_length=128)
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    previous_public_id = models.CharField(
        max_length=64,
        blank=True,
        default="",
        db_index=True,
        help_text="The URL segment replaced by the last rotation (accepted during the overlap).",
    )
    previous_secret = models.CharField(
        max_length=128,
        blank=True,
        default="",
        help_text="The secret replaced by the last rotation (accepted during the overlap).",
    )

    class Meta:
        db_table = "api_webhooktrigger"
        ordering = ["workflow_name"]

    def __str__(self) -> str:
        return f"webhook of {self.workflow_name}"


class WebhookDelivery(models.Model):
    """A signed request that was accepted; the unique signature makes replays fail."""

    trigger = models.ForeignKey(WebhookTrigger, on_delete=models.CASCADE, related_name="deliveries")
    signature = models.CharField(max_length=64)
    timestamp = models.BigIntegerField()
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "api_webhookdelivery"
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["trigger", "signature"], name="webhook_delivery_once")
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.trigger}"
