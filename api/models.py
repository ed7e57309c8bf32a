"""What the REST API stores of its own: plan requests, webhook triggers and deliveries.

Relations to the layers below use ``related_name="+"``: a lower layer never
reaches these tables (the layering rule in ``pyproject.toml``).
"""

from django.conf import settings
from django.db import models

from runs.models import Run
from workflows.models import Workflow


class PlanKind(models.TextChoices):
    CREATE = "create", "Plan a goal"
    REVISE = "revise", "Revise with feedback"
    REJECT = "reject", "Reject with feedback"


class PlanRequestStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    QUESTIONS = "questions", "The planner asks; answer to go on"
    FAILED = "failed", "Failed"


class PlanRequest(models.Model):
    """One asynchronous call of the planner, polled by the client that asked.

    ``workflow`` is the version the planner stored (pending review); ``error`` is
    ``{code, message, details}`` when it failed; ``attempts`` the ids of the
    ``PlanAttempt`` rows of the session. When the planner asked instead of planning,
    the status is ``questions``, ``questions`` holds them and ``question_attempt`` the
    attempt a new request answers (``answers_to`` + ``answers``).
    """

    kind = models.CharField(max_length=8, choices=PlanKind.choices)
    status = models.CharField(
        max_length=10, choices=PlanRequestStatus.choices, default=PlanRequestStatus.QUEUED
    )
    goal = models.TextField(blank=True)
    sample_inputs = models.JSONField(default=dict, blank=True)
    feedback = models.TextField(blank=True)
    based_on = models.ForeignKey(
        Workflow, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    workflow = models.ForeignKey(
        Workflow, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    attempts = models.JSONField(default=list, blank=True)
    questions = models.JSONField(
        default=list,
        blank=True,
        help_text="The planner's clarifying questions, when it asked: [{id, question, options}].",
    )
    question_attempt = models.ForeignKey(
        "workflows.PlanAttempt",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The plan attempt that asked the questions (answer it with answers_to).",
    )
    answers_to = models.ForeignKey(
        "workflows.PlanAttempt",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The plan attempt whose questions this request answers.",
    )
    answers = models.JSONField(default=dict, blank=True, help_text="Question id -> answer.")
    error = models.JSONField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=[k.value for k in PlanKind]), name="plan_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in PlanRequestStatus]),
                name="plan_request_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"plan request {self.pk} ({self.kind}, {self.status})"


class WebhookTrigger(models.Model):
    """A URL that starts a run of the active version of ``workflow_name``.

    ``public_id`` is the URL's last segment and ``secret`` the HMAC key; rotating
    replaces both, so the old URL and signatures stop working at once. The secret is
    kept as is (verifying an HMAC needs it) and shown only when created or rotated.
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

    class Meta:
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
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["trigger", "signature"], name="webhook_delivery_once")
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.trigger}"
