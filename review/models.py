"""Approvals: who approved which frozen version, and the validation run that proved it.

The table keeps the name it had when approvals lived in ``runs`` (``runs_approval``):
moving the model changed no rows.
"""

from django.conf import settings
from django.db import models

from runs.models import Run
from workflows.models import Workflow


class ApprovalStatus(models.TextChoices):
    VALIDATING = "validating", "Validation run in progress"
    PASSED = "passed", "Validation run succeeded"
    FAILED = "failed", "Validation run failed"


class Approval(models.Model):
    """Who approved which frozen version (by hash), and the validation run that proved it."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="approvals")
    definition_hash = models.CharField(max_length=64, help_text="Hash of the version approved.")
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="approvals"
    )
    sample_inputs = models.JSONField(default=dict, blank=True)
    validation_run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="approval"
    )
    status = models.CharField(
        max_length=12, choices=ApprovalStatus.choices, default=ApprovalStatus.VALIDATING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    tool_pins = models.JSONField(
        null=True,
        blank=True,
        help_text="A re-approval: the tool hashes its validation run proves, recorded on the "
        "version when the run passes. Empty: a first approval.",
    )

    class Meta:
        db_table = "runs_approval"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in ApprovalStatus]),
                name="approval_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"approval of {self.workflow} by {self.approved_by}"
