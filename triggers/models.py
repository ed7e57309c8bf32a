"""Webhook triggers and their deliveries: a signed POST starts a run. Event triggers
(``triggers:`` in a workflow file) and the events they took: another workflow's
finished run starts one, once per event (``triggers.events``).

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


class TriggerKind(models.TextChoices):
    ON_WORKFLOW = "on_workflow", "Another workflow's run finished"
    POLL = "poll", "A poll found a new item"


class EventTrigger(models.Model):
    """An event trigger the active version of ``workflow_name`` declares, at
    ``position`` in its ``triggers:`` list. Written when a version is activated
    (``triggers.events.triggers_sync_declared``); the trigger itself (its statuses, its
    inputs, its poll's arguments) is read from the active version when an event comes.

    ``on_workflow``: what the run-finished hook looks up by ``source`` (the workflow it
    waits for). ``poll``: ``source`` is the tool it calls, every ``every_seconds``; beat
    queues a poll once ``next_poll_at`` has come, and the poll stores the ``cursor`` it
    resumes from, in the transaction that creates its runs (``triggers.polls``).
    ``fingerprint`` is the poll's definition but its interval: a new version that changes
    it starts again from the initial cursor."""

    workflow_name = models.CharField(max_length=100)
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=TriggerKind.choices)
    source = models.CharField(max_length=100, db_index=True)
    statuses = models.CharField(
        max_length=40,
        default="succeeded",
        blank=True,
        help_text="The ends it waits for, comma-separated (on_workflow).",
    )
    fingerprint = models.CharField(max_length=64, blank=True, default="")
    every_seconds = models.PositiveIntegerField(null=True, blank=True)
    next_poll_at = models.DateTimeField(null=True, blank=True, db_index=True)
    cursor = models.JSONField(null=True, blank=True, help_text="Where the next poll resumes.")
    cursor_version = models.PositiveBigIntegerField(
        default=0, help_text="How many polls have stored a cursor."
    )
    polled_at = models.DateTimeField(null=True, blank=True, help_text="The last poll's end.")
    last_error = models.TextField(
        blank=True, default="", help_text="Why the last poll failed (empty: it did not)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workflow_name", "position"]
        constraints = [
            models.UniqueConstraint(fields=["workflow_name", "position"], name="event_trigger_once")
        ]

    def __str__(self) -> str:
        if self.kind == TriggerKind.POLL:
            return f"{self.workflow_name} polling {self.source}"
        return f"{self.workflow_name} on {self.source}"


class EventOutcome(models.TextChoices):
    STARTED = "started", "Run started"
    REFUSED = "refused", "Refused (its inputs, the version, or the chain's length)"


class TriggerEvent(models.Model):
    """An event a trigger took, once: the unique (workflow, position, event key) makes a
    second delivery of the same event (a hook called twice, two workers, a poll's page
    read again) start nothing. ``source_run`` is the finished run that was the event
    (``on_workflow``; the key ``run:UUID:END``), a poll's event is an item (the key
    ``item:DEDUP_KEY``); ``run`` the run it started, or none when it was refused
    (``message`` says why)."""

    workflow_name = models.CharField(max_length=100)
    position = models.PositiveIntegerField()
    event_key = models.CharField(max_length=200)
    source_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    source_finished_at = models.DateTimeField(
        null=True, blank=True, help_text="The end of the source run this event is."
    )
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    outcome = models.CharField(max_length=20, choices=EventOutcome.choices)
    message = models.TextField(blank=True, default="")
    chain = models.PositiveIntegerField(
        default=1,
        help_text="This event's run is the Nth in a row each started by the end of the one "
        "before (1: the finished run was started by no event).",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_name", "position", "event_key"], name="trigger_event_once"
            )
        ]

    def __str__(self) -> str:
        return f"event {self.event_key} for {self.workflow_name}"
