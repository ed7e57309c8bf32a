"""Workflows as versioned, frozen definitions, with their steps and edges as rows.

A version's ``definition`` (canonical JSON) and ``definition_hash`` are what runs
read; the Step and Edge rows mirror it for the admin and for queries. Active or
archived versions never change: editing makes a new version.
"""

from django.conf import settings
from django.db import models


class WorkflowStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    PENDING_REVIEW = "pending_review", "Pending review"
    VALIDATING = "validating", "Validating"
    ACTIVE = "active", "Active"
    REJECTED = "rejected", "Rejected"
    ARCHIVED = "archived", "Archived"


# Allowed lifecycle transitions, enforced by services.
WORKFLOW_TRANSITIONS: dict[str, frozenset[str]] = {
    WorkflowStatus.DRAFT: frozenset({WorkflowStatus.PENDING_REVIEW, WorkflowStatus.ARCHIVED}),
    WorkflowStatus.PENDING_REVIEW: frozenset(
        {WorkflowStatus.VALIDATING, WorkflowStatus.REJECTED, WorkflowStatus.ARCHIVED}
    ),
    WorkflowStatus.VALIDATING: frozenset({WorkflowStatus.ACTIVE, WorkflowStatus.PENDING_REVIEW}),
    WorkflowStatus.ACTIVE: frozenset({WorkflowStatus.ARCHIVED}),
    WorkflowStatus.REJECTED: frozenset({WorkflowStatus.ARCHIVED}),
    WorkflowStatus.ARCHIVED: frozenset(),
}
FROZEN_STATUSES = frozenset(
    {WorkflowStatus.VALIDATING, WorkflowStatus.ACTIVE, WorkflowStatus.ARCHIVED}
)


class TemplateUse(models.TextChoices):
    """Whether the planner may show an active version as a template for new goals."""

    AUTO = "auto", "When similar (default)"
    PREFERRED = "preferred", "Template (preferred when similar)"
    EXCLUDED = "excluded", "Excluded (never shown to the planner)"


class Workflow(models.Model):
    name = models.CharField(max_length=100, db_index=True, help_text="Slug shared by all versions.")
    version = models.PositiveIntegerField(help_text="1, 2, 3… per name.")
    status = models.CharField(
        max_length=20,
        choices=WorkflowStatus.choices,
        default=WorkflowStatus.DRAFT,
        db_index=True,
        help_text="Lifecycle state of this version.",
    )
    description = models.TextField(blank=True)
    goal = models.TextField(blank=True, help_text="The plain-words goal the workflow serves.")
    inputs = models.JSONField(default=dict, blank=True, help_text="Declared run inputs.")
    tools = models.JSONField(default=list, blank=True, help_text="Flow-level tool allowlist.")
    outputs = models.JSONField(default=dict, blank=True, help_text="Run output -> reference.")
    schedule = models.CharField(max_length=100, blank=True, help_text="Cron expression, if any.")
    notifications = models.JSONField(default=dict, blank=True)
    definition = models.JSONField(help_text="The whole workflow in the file form (frozen).")
    definition_hash = models.CharField(
        max_length=64, db_index=True, help_text="sha256 of the canonical JSON."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_workflows",
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="approved_workflows",
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    tool_pins = models.JSONField(
        default=dict,
        blank=True,
        help_text="Tool name -> definition hash, recorded at approval; a run refuses changes.",
    )
    template_use = models.CharField(
        max_length=10,
        choices=TemplateUse.choices,
        default=TemplateUse.AUTO,
        help_text="Whether the planner may show this version, once active, as a template for "
        "similar goals: when similar, preferred, or never. Set by a reviewer.",
    )
    workflow_pins = models.JSONField(
        default=dict,
        blank=True,
        help_text="Workflow its `workflow` steps run -> the definition hash of the version "
        "active at approval; a run refuses a child changed since.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["name", "version"], name="workflow_name_version_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in WorkflowStatus]),
                name="workflow_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(version__gte=1), name="workflow_version_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(template_use__in=[t.value for t in TemplateUse]),
                name="workflow_template_use_valid",
            ),
        ]
        permissions = [
            ("approve_workflow", "Can approve a workflow version"),
            ("curate_templates", "Can mark a workflow as a planner template or exclude it"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Step(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="steps")
    step_id = models.CharField(max_length=64, help_text="Unique slug within the version.")
    # No choices and no check constraint: the kinds are the ``Step`` union of
    # workflows/schema.py, which validated the definition these rows mirror. Listing them
    # here would make every new kind a migration, and one that fails on rows of a kind
    # a later release drops.
    kind = models.CharField(
        max_length=16, help_text="The step's kind, as in the definition (docs/steps.md)."
    )
    tool = models.CharField(max_length=64, blank=True, help_text="Tool called, for tool/foreach.")
    position = models.PositiveIntegerField(help_text="Order in the file.")
    input_mapping = models.JSONField(default=dict, blank=True)
    config = models.JSONField(
        default=dict, blank=True, help_text="The step as written in the file."
    )
    on_error = models.CharField(max_length=8, default="fail")

    class Meta:
        ordering = ["workflow", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "step_id"], name="step_id_unique_per_version"
            ),
            models.CheckConstraint(
                condition=models.Q(on_error__in=["fail", "continue"]), name="step_on_error_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.step_id


class Edge(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="edges")
    from_step = models.CharField(max_length=64)
    to_step = models.CharField(max_length=64)
    when = models.CharField(max_length=100, blank=True, help_text="Branch label, if any.")
    inferred = models.BooleanField(default=False, help_text="Inferred from an input mapping.")

    class Meta:
        ordering = ["workflow", "from_step", "to_step"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "from_step", "to_step", "when"], name="edge_unique"
            ),
            models.CheckConstraint(
                condition=~models.Q(from_step=models.F("to_step")), name="edge_no_self_loop"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.from_step} -> {self.to_step}" + (f" [{self.when}]" if self.when else "")


class PlanAttemptStatus(models.TextChoices):
    VALID = "valid", "Valid plan"
    INVALID = "invalid", "Invalid plan (validator errors)"
    QUESTIONS = "questions", "Clarifying questions"
    ERROR = "error", "LLM or transport error"


class PlanAttemptOutcome(models.TextChoices):
    """What the session did after this attempt."""

    ACCEPTED = "accepted", "Plan accepted"
    REPAIR_REQUESTED = "repair_requested", "Sent back for a repair"
    BUDGET_EXHAUSTED = "budget_exhausted", "Invalid, no repair round left"
    QUESTIONS_ASKED = "questions_asked", "Questions asked, waiting for answers"
    FAILED = "failed", "LLM or transport error"


class PlanAttempt(models.Model):
    """One call of the planner: the audit trail from a goal to a proposed version.

    Repair rounds (validator messages fed back) and revisions (reviewer feedback)
    each add a row; ``workflow`` is the version the attempt produced, if any.
    """

    goal = models.TextField(help_text="The plain-words goal planned for.")
    workflow = models.ForeignKey(
        Workflow,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="plan_attempts",
        help_text="The version this attempt produced (none when it failed).",
    )
    based_on = models.ForeignKey(
        Workflow,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="revisions",
        help_text="The version a revision started from.",
    )
    revision = models.PositiveIntegerField(default=1, help_text="1 = first plan; 2.. = revisions.")
    repair_round = models.PositiveIntegerField(
        default=0, help_text="0 = first try; 1.. = repairs from validator messages."
    )
    repair_budget = models.PositiveIntegerField(
        default=0, help_text="Repair rounds the session allowed in all."
    )
    outcome = models.CharField(
        max_length=20,
        choices=PlanAttemptOutcome.choices,
        blank=True,
        help_text="What followed: accepted, sent back for a repair, or given up.",
    )
    feedback = models.TextField(blank=True, help_text="Reviewer feedback this revision answers.")
    model = models.CharField(max_length=200, help_text="LLM model asked.")
    prompt = models.JSONField(default=list, help_text="Messages sent (no secrets).")
    raw_reply = models.TextField(blank=True, help_text="The model's reply as received.")
    usage = models.JSONField(default=dict, blank=True, help_text="Token usage reported.")
    cost_pico = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="What the call cost, in pico-dollars (10^-12 USD), at the planner "
        "endpoint's prices; 0 when no answer came; empty: the model has no price (or the "
        "call was recorded before costs were).",
    )
    validator_report = models.JSONField(default=list, blank=True, help_text="Validator issues.")
    sample_inputs = models.JSONField(
        default=dict, blank=True, help_text="The sample inputs given with the goal."
    )
    templates = models.JSONField(
        default=list,
        blank=True,
        help_text="Approved workflows shown as templates: [{name, version, score}], best first.",
    )
    offered_tools = models.JSONField(
        default=list,
        blank=True,
        help_text="The tools the planner was shown, best first: [{name, why, score}] (why: "
        "all, pinned, named or matched; score: BM25, empty when the catalog was shown whole).",
    )
    lessons = models.JSONField(
        default=list,
        blank=True,
        help_text="Earlier plans for similar goals that went wrong, shown as warnings, most "
        "similar first: [{kind, workflow, version, text, score}] (kind: rejected or "
        "validation_failed; text: the reviewer's feedback or the run's error).",
    )
    questions = models.JSONField(
        default=list,
        blank=True,
        help_text="Clarifying questions this attempt asked: [{id, question, options}].",
    )
    clarifications = models.JSONField(
        default=list,
        blank=True,
        help_text="Earlier question rounds and their answers fed to this attempt: "
        "[{questions, answers: {id: text}}].",
    )
    status = models.CharField(max_length=10, choices=PlanAttemptStatus.choices)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="plan_attempts",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=["valid", "invalid", "questions", "error"]),
                name="plan_attempt_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"plan attempt {self.pk} ({self.status})"
