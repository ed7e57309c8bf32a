"""The design phase's records: approvals of frozen versions, and plan requests.

``Approval``: who approved which frozen version, and the validation run that proved
it. ``PlanRequest``: one asynchronous call of the planner (``review/plans.py``),
polled by the client that asked. Each table keeps the name it had before the model
moved here (``runs_approval``, ``api_planrequest``): moving a model changed no rows.
"""

from django.conf import settings
from django.db import models

from runs.models import Run
from workflows.models import Workflow


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Waiting for more approvals"
    VALIDATING = "validating", "Validation run in progress"
    PASSED = "passed", "Validation run succeeded"
    FAILED = "failed", "Validation run failed"


class ApprovalKind(models.TextChoices):
    REVIEW = "review", "Reviewer approval"
    IMPORT_SUPERUSER = "import_superuser", "Import by superuser (no review, no validation run)"


class Approval(models.Model):
    """Who approved which frozen version (by hash), and the validation run that proved it.

    One row per approver. Under a policy needing several approvers the first rows
    wait (``pending``); the approval that meets the policy starts the validation
    run and carries it. Rows count only for the definition hash they name.
    """

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="approvals")
    definition_hash = models.CharField(max_length=64, help_text="Hash of the version approved.")
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="approvals"
    )
    sample_inputs = models.JSONField(default=dict, blank=True)
    validation_run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="review_approval"
    )
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.VALIDATING
    )
    kind = models.CharField(
        max_length=20,
        choices=ApprovalKind.choices,
        default=ApprovalKind.REVIEW,
        help_text="A reviewer's approval, or an activation by a superuser's import.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    tool_pins = models.JSONField(
        null=True,
        blank=True,
        help_text="A re-approval: the tool hashes its validation run proves, recorded on the "
        "version when the run passes. Empty: a first approval.",
    )
    workflow_pins = models.JSONField(
        null=True,
        blank=True,
        help_text="A re-approval: the definition hashes of the child workflows its `workflow` "
        "steps run, recorded on the version with the tool hashes when the run passes.",
    )

    class Meta:
        db_table = "runs_approval"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in ApprovalStatus]),
                name="approval_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=[k.value for k in ApprovalKind]),
                name="approval_kind_valid",
            ),
        ]
        indexes = [models.Index(fields=["workflow", "definition_hash"], name="approval_hash_idx")]

    def __str__(self) -> str:
        return f"approval of {self.workflow} by {self.approved_by}"


class ApprovalPolicy(models.Model):
    """A workflow's own approval policy (by name: every version), overriding the settings.

    A blank field falls back to the global setting (``FLOWPILOT_APPROVALS_REQUIRED``,
    ``FLOWPILOT_AUTHOR_MAY_APPROVE``).
    """

    workflow_name = models.CharField(
        max_length=100, unique=True, help_text="The workflow (all its versions) this applies to."
    )
    approvals_required = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Distinct approvers a version needs; blank: FLOWPILOT_APPROVALS_REQUIRED.",
    )
    author_may_approve = models.BooleanField(
        null=True,
        blank=True,
        help_text="Whether the plan's author counts as an approver; blank: "
        "FLOWPILOT_AUTHOR_MAY_APPROVE.",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who last changed this policy.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "approval policy"
        verbose_name_plural = "approval policies"
        ordering = ["workflow_name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(approvals_required__isnull=True)
                | models.Q(approvals_required__gte=1, approvals_required__lte=10),
                name="approval_policy_required_range",
            ),
        ]

    def __str__(self) -> str:
        return f"approval policy of {self.workflow_name}"


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
        db_table = "api_planrequest"  # its name from when the REST API owned it: no rows moved
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
