"""Every report sent about a run: one row per (run, channel, event), with each try; and
every notice that an approval step waits: one row per (request, channel)."""

from django.db import models

from runs.models import ApprovalRequest, Run


class Channel(models.TextChoices):
    EMAIL = "email", "Email"
    WEBHOOK = "webhook", "Webhook"


class Event(models.TextChoices):
    FAILED = "failed", "Run failed"
    RECOVERED = "recovered", "Run recovered"
    SUCCEEDED = "succeeded", "Run succeeded"
    APPROVAL = "approval", "An approval step waits"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class Delivery(models.Model):
    """One report on one channel. Unique per (run, channel, event): a hook that fires
    twice for the same run never sends a second report. An approval notice is unique
    per (approval request, channel) instead: a run may wait several times."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="deliveries")
    approval_request = models.ForeignKey(
        ApprovalRequest, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    channel = models.CharField(max_length=8, choices=Channel.choices)
    event = models.CharField(max_length=10, choices=Event.choices)
    target = models.TextField(help_text="Recipients, or the webhook URL.")
    status = models.CharField(
        max_length=8, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    attempt_log = models.JSONField(default=list, blank=True, help_text="One entry per try.")
    payload = models.JSONField(default=dict, blank=True, help_text="The report sent.")
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "channel", "event"],
                condition=models.Q(approval_request__isnull=True),
                name="one_delivery_per_run_channel_event",
            ),
            models.UniqueConstraint(
                fields=["approval_request", "channel"],
                condition=models.Q(approval_request__isnull=False),
                name="one_notice_per_approval_channel",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.event} for run {self.run_id}"
