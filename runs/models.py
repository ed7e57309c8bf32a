"""Runs and their step results. StepResults are the checkpoint: written after every step."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models

from runs.state import (  # noqa: F401 - re-exported: the statuses' names beside the models
    RUN_TERMINAL,
    RUN_TRANSITIONS,
    STEP_IN_FLIGHT,
    STEP_TERMINAL,
    RunStatus,
    RunTrigger,
    StepStatus,
)
from tools.llm.prices import usd
from workflows.models import Workflow

if TYPE_CHECKING:  # the registry (and the tool kinds it imports) loads where runs are made
    from tools.registry import ToolRegistry


class Run(models.Model):
    workflow = models.ForeignKey(
        Workflow,
        on_delete=models.PROTECT,
        related_name="runs",
        help_text="The version this run ran.",
    )
    # Not a column: the registry ``run_create`` validated this run against, kept on the
    # instance it returns so a run executed right away in this process does not read the
    # tool table's state again (``runs.services.run_execute``).
    validated_registry: ToolRegistry | None = None
    # Not a column either: the step rows ``run_create`` has just written (by step id), so
    # ``run_execute`` starting this instance first does not read them back. Taken (and
    # cleared) by the first start in this process.
    created_results: dict[str, StepResult] | None = None
    uuid = models.UUIDField(
        default=uuid.uuid4,
        unique=True,
        editable=False,
        help_text="Globally unique: the base of every idempotency key the run sends.",
    )
    definition_hash = models.CharField(
        max_length=64, help_text="Hash of the frozen definition run."
    )
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices)
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING, db_index=True
    )
    inputs = models.JSONField(default=dict, blank=True, help_text="Run inputs (secrets redacted).")
    outputs = models.JSONField(null=True, blank=True, help_text="Run outputs, when it succeeded.")
    error_summary = models.TextField(blank=True, help_text="Why the run failed, in one paragraph.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The person who started it (the admin, the REST API, the MCP server, an "
        "approval's validation run, a restart or a replay); empty for a schedule, a webhook, "
        "the command line or a child run.",
    )
    resumed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the run was last resumed (resumeflow, the admin, the API); empty "
        "when it never was. Its duration stays counted from its first start.",
    )
    restarted_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="restarts",
        help_text="The finished run this one restarted (runs/restart.py): its checkpoint "
        "outside the re-run steps was reused, never executed again.",
    )
    restarted_from_step = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The step the restart re-ran from (with its descendants); empty: from the "
        "trigger, every step again.",
    )
    replay_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replays",
        help_text="A replay: the validation run whose recorded tool calls this run was served "
        "offline (runs/replay/).",
    )
    concurrency_key = models.CharField(  # noqa: DJ001 - null (no limit) is not "" (one pool)
        max_length=255,
        null=True,
        blank=True,
        help_text="Under its workflow's concurrency limit (runs/concurrency.py): the key's "
        "value naming its pool of slots (empty: one pool for the workflow). Null: no limit.",
    )
    # A child run of a `workflow` step (runs/engine/kinds/workflow.py): its parent run and step.
    parent_run = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="child_runs",
        help_text="The run whose `workflow` step started this run (empty for a top-level run).",
    )
    parent_step = models.ForeignKey(
        "StepResult",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="child_runs",
        help_text="The `workflow` step of the parent run this run serves.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in RunStatus]), name="run_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(trigger__in=[t.value for t in RunTrigger]),
                name="run_trigger_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["workflow", "status"], name="run_workflow_status_idx"),
            # The slots and the queue of one key (runs/concurrency.py): limited runs only.
            models.Index(
                fields=["concurrency_key", "status"],
                name="run_concurrency_idx",
                condition=models.Q(concurrency_key__isnull=False),
            ),
        ]
        permissions = [("operate_run", "Can run again, resume and cancel runs")]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.workflow}"

    @property
    def duration(self) -> timedelta | None:
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None

    @property
    def resume_duration(self) -> timedelta | None:
        """How long its last resume took (from the resume to the end), when it was
        resumed and has finished since."""
        if self.resumed_at and self.finished_at and self.finished_at >= self.resumed_at:
            return self.finished_at - self.resumed_at
        return None


class StepResult(models.Model):
    # Every step transition rewrites the row and, since its status changes, adds an
    # entry to each of the table's indexes: so the table keeps only the indexes a query
    # uses. The run's steps are found by ``one_result_per_run_step`` (its leading column
    # is the run), never by a status alone (see ``Meta.indexes``): neither the foreign
    # key nor the status has an index of its own.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="step_results", db_index=False
    )
    step_id = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0, help_text="Tries made so far.")
    attempt_log = models.JSONField(
        default=list, blank=True, help_text="One entry per try: timings, error, retry delay."
    )
    inputs = models.JSONField(null=True, blank=True, help_text="Resolved inputs, secrets redacted.")
    inputs_truncated = models.BooleanField(
        default=False, help_text="The inputs record was over the size limit: a preview is stored."
    )
    output = models.JSONField(null=True, blank=True, help_text="Step output, secrets scrubbed.")
    output_truncated = models.BooleanField(
        default=False, help_text="The output or response body was cut at the size limit."
    )
    output_bytes = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="The output's size as JSON when the step built it, before any stored "
        "preview (a refused one is in the error: output_too_large).",
    )
    error = models.JSONField(null=True, blank=True, help_text="{type, message, retryable}.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    reused = models.BooleanField(
        default=False,
        help_text="Copied from the checkpoint of the run this one restarted from: not "
        "executed in this run (its times and attempts are the original's).",
    )
    # Distributed runs only (runs/engine/celery/); the in-process engine leaves these empty.
    lease_expires_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Celery runs: when this queued or running step counts as lost and the sweeper "
        "re-queues it, unless its worker's heartbeat extends the lease first.",
    )
    claim_token = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="The claim of the task executing this step; a result written under an older "
        "claim is ignored.",
    )
    worker = models.CharField(
        max_length=255, blank=True, default="", help_text="The Celery worker that last claimed it."
    )
    attempt_limit = models.PositiveIntegerField(
        default=0,
        help_text="Celery runs: the last try number the step's retry policy allows since it was "
        "queued (a try lost with its worker does not count).",
    )

    class Meta:
        ordering = ["run", "id"]
        indexes = [
            models.Index(  # the sweeper's query: in-flight steps whose lease ran out
                fields=["lease_expires_at"],
                condition=models.Q(status__in=sorted(STEP_IN_FLIGHT)),
                name="step_in_flight_lease_idx",
            ),
            models.Index(  # "has a step of this run failed?", asked on every Celery hop
                fields=["run"],
                condition=models.Q(status=StepStatus.FAILED),
                name="step_failed_by_run_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "step_id"], name="one_result_per_run_step"),
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in StepStatus]),
                name="step_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.step_id} ({self.status})"

    @property
    def duration(self) -> timedelta | None:
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None


class RecordingKind(models.TextChoices):
    HTTP = "http", "HTTP exchange"
    MCP = "mcp", "MCP tool call"
    LLM = "llm", "LLM chat call"


class ToolCallRecording(models.Model):
    """One call a validation run's step made: what was sent and what came back.

    Three kinds (``kind``): an **HTTP** exchange of a tool call (method, URL, body and
    headers, status, response headers and body), an **MCP** tool call (``request``:
    server, tool and arguments; ``response``: the server's result), or an **LLM** chat
    call of an ``llm`` step or an LLM decision (``request``: endpoint, the model the
    step names, messages, tools, response format and options; ``response``: content,
    tool calls, finish reason, usage, the model that answered, the HTTP tries). An
    answer that never came is in ``error``.

    Written through the run's ``CallRecorder`` (``runs.replay.recorder``), which the
    engine hands to every tool call and model call; ``replayflow`` serves these back
    instead of the network, the MCP server and the LLM endpoint. Everything is masked
    by value with the run's redactor (secrets read ``***``) and capped at
    ``FLOWPILOT_MAX_STORED_OUTPUT_BYTES`` (``body_truncated``).
    """

    step_result = models.ForeignKey(StepResult, on_delete=models.CASCADE, related_name="tool_calls")
    item = models.IntegerField(
        null=True, blank=True, help_text="The foreach item or llm tool-call index; empty: none."
    )
    kind = models.CharField(
        max_length=8,
        choices=RecordingKind.choices,
        default=RecordingKind.HTTP,
        help_text="What was called: an HTTP exchange, an MCP tool or the LLM.",
    )
    tool = models.CharField(
        max_length=200, help_text="The tool called; for an LLM call, the endpoint's name."
    )
    method = models.CharField(
        max_length=16, help_text="HTTP: the method; MCP: `tools/call`; LLM: `chat`."
    )
    url = models.TextField(
        help_text="HTTP: the full URL with its query, secrets masked; MCP: "
        "`mcp:<server>/<tool>`; LLM: `llm:<endpoint>/<model sent>`."
    )
    request_headers = models.JSONField(default=dict, blank=True)
    request_body = models.TextField(blank=True, help_text="The body sent, as text, masked.")
    request = models.JSONField(
        null=True,
        blank=True,
        help_text="MCP and LLM calls: the request as a replay compares it (masked); "
        "`{preview, truncated}` when over the recording cap.",
    )
    request_hash = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="MCP and LLM calls: SHA-256 of the masked request's canonical JSON, "
        "which a replay matches.",
    )
    status = models.IntegerField(null=True, blank=True, help_text="Empty: no answer (error).")
    response_headers = models.JSONField(default=dict, blank=True)
    response_body = models.TextField(blank=True, help_text="Decoded body (UTF-8), masked.")
    response_encoding = models.CharField(max_length=40, blank=True, default="utf-8")
    response = models.JSONField(
        null=True,
        blank=True,
        help_text="MCP: the tool's result; LLM: the reply (content, tool calls, finish "
        "reason, usage, model, tries); masked.",
    )
    body_truncated = models.BooleanField(
        default=False,
        help_text="The response was over the recording cap: only its start is kept.",
    )
    error = models.JSONField(
        null=True,
        blank=True,
        help_text="{type, message, …} when no answer came (timeout, refused, an error reply).",
    )
    elapsed_ms = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["step_result", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=[k.value for k in RecordingKind]),
                name="tool_call_recording_kind_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.url} ({self.status or 'no answer'})"


class RunIdempotencyKey(models.Model):
    """A client's ``Idempotency-Key`` and the one run it created (``runs.idempotency``).

    The unique constraint on (user, key) is the guarantee: of two concurrent requests
    with one key, the second insert fails and that request returns the first run.
    ``fingerprint`` is the hash of what was asked (version and inputs), so a key reused
    for a different request is refused instead of answered with the wrong run.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="idempotency_key")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="run_idempotency_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.key} → run {self.run_id}"


class LLMCallState(models.TextChoices):
    RESERVED = "reserved", "Reserved (the call is being made)"
    ANSWERED = "answered", "Answered"
    FAILED = "failed", "No answer"


class LLMCall(models.Model):
    """One model call a run made (an ``llm`` step's turn, an LLM decision): the money
    ledger (``runs.engine.spend``).

    Written *before* the call, ``reserved`` at its estimate (so that two runs under one
    monthly budget cannot both spend its last dollar), then settled with the tokens the
    endpoint reported and their cost at the endpoint's price table (``answered``), or
    ``failed`` when no answer came: at no cost when the request was surely not processed
    (refused, 401, 429), at its estimate when it may have been (a timeout, the step
    cancelled). An answer without usage is charged at its estimate too
    (``usage_reported``). Costs are whole pico-dollars (10⁻¹² USD,
    ``tools.llm.prices``), so every total is exact. A row outlives its run (retention
    deletes runs, not what the month has spent): ``workflow_name`` and ``step_id`` say
    whose it was. ``cost_pico`` is empty for a model with no price.
    """

    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_calls"
    )
    workflow_name = models.CharField(max_length=100)
    step_id = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, help_text="`llm` or `decision`.")
    endpoint = models.CharField(max_length=64)
    model = models.CharField(
        max_length=200, help_text="The model that answered (the one asked, until it answers)."
    )
    state = models.CharField(
        max_length=10, choices=LLMCallState.choices, default=LLMCallState.RESERVED
    )
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    usage_reported = models.BooleanField(
        default=True,
        help_text="False: the answer said nothing of its tokens; the call is charged at its "
        "estimate.",
    )
    cost_pico = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Pico-dollars (10^-12 USD): the estimate while reserved, then the cost; "
        "empty: the model has no price.",
    )
    estimate_pico = models.BigIntegerField(
        null=True, blank=True, help_text="What was reserved before the call (pico-dollars)."
    )
    created_at = models.DateTimeField(db_index=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "LLM call"
        verbose_name_plural = "LLM calls"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["workflow_name", "created_at"], name="llm_call_workflow_month"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=[s.value for s in LLMCallState]),
                name="llm_call_state_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.workflow_name}/{self.step_id} {self.model} ({self.state})"

    @property
    def cost_usd(self) -> Decimal | None:
        return usd(self.cost_pico)


class ScenarioStatus(models.TextChoices):
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed (an expectation was not met)"
    ERROR = "error", "Error (the replay run failed, or a call had no recording)"
    SKIPPED = "skipped", "Not run (no validation run recorded the calls yet)"


class ScenarioResult(models.Model):
    """One test scenario of a version (``tests:``), run offline against a validation run's
    recorded calls (``runs.scenarios``): passed, failed (with each unmet expectation),
    error or skipped. The newest row per scenario and definition hash counts."""

    workflow = models.ForeignKey(
        Workflow, on_delete=models.CASCADE, related_name="scenario_results"
    )
    definition_hash = models.CharField(max_length=64, help_text="The definition tested.")
    scenario = models.CharField(max_length=64, help_text="The scenario's name.")
    status = models.CharField(max_length=8, choices=ScenarioStatus.choices)
    failures = models.JSONField(
        default=list, blank=True, help_text="Each unmet expectation, or why it could not run."
    )
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The replay run that played the scenario.",
    )  # fmt: skip
    validation_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The validation run whose recorded calls answered it.",
    )  # fmt: skip
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workflow", "scenario", "-created_at", "-id"]
        indexes = [
            models.Index(fields=["workflow", "definition_hash"], name="scenario_version_idx")
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=["passed", "failed", "error", "skipped"]),
                name="scenario_status_valid",
            )
        ]

    def __str__(self) -> str:
        return f"{self.workflow} scenario {self.scenario}: {self.status}"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Waiting for a decision"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    TIMED_OUT = "timed_out", "Timed out"
    CANCELLED = "cancelled", "Cancelled (the run ended first)"


class ApprovalRequest(models.Model):
    """An ``approval`` step waiting for people (``runs.approvals``): who may decide
    (``approvers`` as written, ``required`` distinct approvals, whether the run's
    ``author`` may), the form of the values they give, and the **preview**: the
    requests the next steps that change something will send, rendered with the data
    the run held when the step started to wait (secrets masked), and its hash, which
    each decision records as what its author saw. One request per time the step waits
    (a step asked again after a restart or a resume is a new request)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approval_requests")
    step_result = models.ForeignKey(
        StepResult, on_delete=models.CASCADE, related_name="approval_requests"
    )
    step_id = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING
    )
    approvers = models.JSONField(default=list, blank=True, help_text="As the step names them.")
    required = models.PositiveSmallIntegerField(default=1)
    author_may_approve = models.BooleanField(default=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who started the run (none: a schedule, a trigger, a command).",
    )
    form = models.JSONField(null=True, blank=True, help_text="JSON Schema of the values.")
    preview = models.JSONField(
        default=list, blank=True, help_text="The requests the next steps will send (masked)."
    )
    preview_hash = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    on_timeout = models.CharField(max_length=10, default="fail")
    output = models.JSONField(null=True, blank=True, help_text="The values it was approved with.")
    message = models.TextField(blank=True, default="", help_text="Why it was rejected.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        permissions = [("approve_run", "Can approve a run's approval steps that name nobody")]
        constraints = [
            models.UniqueConstraint(
                fields=["step_result"],
                condition=models.Q(status="pending"),
                name="one_pending_approval_per_step",
            )
        ]

    def __str__(self) -> str:
        return f"approval of `{self.step_id}` in run {self.run_id}"


class ApprovalDecision(models.Model):
    """One person's decision on an approval request: who, when, from where, what they
    saw (the preview's hash), and the values they gave. Once per person."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="decisions")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150, help_text="Kept if the user is removed.")
    approved = models.BooleanField()
    values = models.JSONField(null=True, blank=True)
    comment = models.TextField(blank=True, default="")
    preview_hash = models.CharField(
        max_length=64, blank=True, default="", help_text="The preview the person saw."
    )
    via = models.CharField(max_length=10, help_text="admin, api, mcp or link.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["request", "username"], name="one_decision_per_person")
        ]

    def __str__(self) -> str:
        verb = "approved" if self.approved else "rejected"
        return f"{self.username} {verb} {self.request}"


class ApprovalLink(models.Model):
    """A signed, single-use, expiring link that decides an approval request as one of
    its approvers (``runs.approval_links``), sent by the step's ``notify``. Only the
    hash of its secret part is kept: the link itself exists only in the message."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="links")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    nonce_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"link of {self.request} for user {self.user_id}"
