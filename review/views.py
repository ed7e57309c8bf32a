"""Admin-side views of the review flow, mixed into ``WorkflowAdmin`` (wired by its ``get_urls``).

Each view parses a form, calls one service and reports with ``message_user``:
approve (validation run), reject with feedback (the planner revises), edit as
JSON (a new version), run, archive, submit for review, and "New plan". A form
that fails comes back with what was typed and every error; permissions are
enforced by the services, so a forged POST is refused the same way.

The admin is a surface, like the API and the commands: it calls the services of
``review``, ``runs`` and ``workflows``; none of those lower layers imports this app.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    QueryDict,
)
from django.template.response import TemplateResponse
from django.urls import reverse

from review.forms import EditJSONForm, InputsForm, NewPlanForm, QuestionsForm, RejectForm
from review.models import ApprovalStatus
from review.policy import approval_tally
from review.selectors import declared_inputs, sample_input_defaults
from review.services import APPROVE_PERMISSION, workflow_approve
from runs.models import RUN_TERMINAL, Run, RunStatus, RunTrigger
from runs.services import run_create, run_enqueue
from tools.errors import FlowpilotError
from tools.llm import LLMEndpointError
from tools.permissions import actor_user
from tools.registry import ToolRegistry
from tools.secrets import free_text_redactor
from workflows.inputs import InputsInvalid
from workflows.models import PlanAttempt, PlanAttemptStatus, Workflow, WorkflowStatus
from workflows.planner import PlanError, PlanQuestions, PlanRoundsExhausted
from workflows.revisions import (
    ApprovalError,
    ApprovalForbidden,
    ApprovalStateError,
    DefinitionInvalid,
    DefinitionUnchanged,
    workflow_edit_json,
    workflow_reject,
)
from workflows.services import WorkflowTransitionError, workflow_export, workflow_transition
from workflows.validator import WorkflowInvalid

ACTION_TEMPLATE = "review/workflow/action.html"


def change_url(workflow: Workflow) -> str:
    return reverse("admin:workflows_workflow_change", args=[workflow.pk])


def _pretty_export(workflow: Workflow) -> str:
    return json.dumps(workflow_export(workflow=workflow), indent=2, ensure_ascii=False)


def _run_message(run: Run) -> tuple[str, int]:
    if run.status == RunStatus.SUCCEEDED:
        return f"Run {run.pk} succeeded.", messages.SUCCESS
    if run.status in RUN_TERMINAL:
        detail = f": {run.error_summary}" if run.error_summary else "."
        return f"Run {run.pk} {run.status}{detail}", messages.ERROR
    return f"Run {run.pk} started on the workers; this page follows it.", messages.INFO


class WorkflowReviewViews(admin.ModelAdmin):
    """The review actions of ``WorkflowAdmin`` (a model admin of workflow versions)."""

    # --- helpers -------------------------------------------------------------

    def _version(self, request: HttpRequest, object_id: str) -> Workflow:
        workflow = self.get_object(request, object_id)
        if workflow is None:
            raise Http404(f"no workflow version with id {object_id!r}")
        if not self.has_view_permission(request, workflow):
            raise PermissionDenied
        return workflow

    def _page(
        self, request: HttpRequest, workflow: Workflow | None, title: str, **context: Any
    ) -> TemplateResponse:
        return TemplateResponse(
            request,
            ACTION_TEMPLATE,
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "original": workflow,
                "title": title,
                **context,
            },
        )

    def _back(self, workflow: Workflow) -> HttpResponseRedirect:
        return HttpResponseRedirect(change_url(workflow))

    def _inputs_form(self, workflow: Workflow, data: QueryDict | None = None) -> InputsForm:
        declared = declared_inputs(workflow)
        values = sample_input_defaults(workflow, declared)
        return InputsForm(data, declared=declared, values=values)

    # --- approve -----------------------------------------------------------

    def approve_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        workflow = self._version(request, object_id)
        if request.method != "POST" and not request.user.has_perm(APPROVE_PERMISSION):
            self.message_user(
                request,
                f"You may not approve workflows: that needs the `{APPROVE_PERMISSION}` "
                "permission. Ask an approver to review this version.",
                messages.ERROR,
            )
            return self._back(workflow)
        form = self._inputs_form(workflow, request.POST or None)
        page = {"form": form, "action": "approve", "submit_label": "Approve and run validation"}
        title = f"Approve {workflow}"
        if request.method != "POST" or not form.is_valid():
            return self._page(request, workflow, title, **page)
        try:
            approval = workflow_approve(
                version=workflow, approved_by=request.user, sample_inputs=form.inputs()
            )
        except (ApprovalForbidden, ApprovalStateError) as exc:
            self.message_user(request, f"Not approved: {exc.message}", messages.ERROR)
            return self._back(workflow)
        except InputsInvalid as exc:  # shown again with a credential typed into it masked
            page["form"] = self._inputs_form(workflow, masked_post(request.POST))
            return self._page(request, workflow, title, problems=exc.problems, **page)
        except WorkflowInvalid as exc:
            return self._page(request, workflow, title, issues=exc.report.errors, **page)
        run = approval.validation_run
        if approval.status == ApprovalStatus.PENDING or run is None:
            self.message_user(
                request,
                f"Approval of {workflow} recorded: {approval_tally(version=workflow).text()}. "
                "The validation run starts when the approval policy is met.",
                messages.INFO,
            )
        elif approval.status == ApprovalStatus.VALIDATING:
            self.message_user(
                request,
                f"Approved {workflow}: validation run {run.pk} is running on the workers; "
                "the version becomes active when it succeeds.",
                messages.INFO,
            )
        elif approval.status == ApprovalStatus.PASSED:
            self.message_user(
                request,
                f"Approved {workflow}: validation run {run.pk} succeeded; the version is active.",
                messages.SUCCESS,
            )
        else:
            self.message_user(
                request,
                f"Validation run {run.pk} failed: {run.error_summary or run.status}. "
                f"{workflow} stays in review.",
                messages.ERROR,
            )
        return self._back(workflow)

    # --- reject ------------------------------------------------------------

    def reject_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        workflow = self._version(request, object_id)
        form = RejectForm(request.POST or None)
        page = {"form": form, "action": "reject", "submit_label": "Reject and ask for a revision"}
        if request.method != "POST" or not form.is_valid():
            return self._page(request, workflow, f"Reject {workflow}", **page)
        try:
            revised = workflow_reject(
                version=workflow, rejected_by=request.user, feedback=form.cleaned_data["feedback"]
            )
        except PlanRoundsExhausted as exc:
            text = f"Revision limit reached: {exc.message}"
            self.message_user(request, text, messages.ERROR)
            return self._page(request, workflow, f"Reject {workflow}", problems=[text], **page)
        except (PlanError, ApprovalError) as exc:
            text = f"Not revised: {exc.message}"
            page["form"] = RejectForm(masked_post(request.POST))  # as stored: masked
            return self._page(request, workflow, f"Reject {workflow}", problems=[text], **page)
        self.message_user(
            request,
            f"Rejected {workflow}; the planner proposed {revised}, now pending review.",
            messages.SUCCESS,
        )
        return self._back(revised)

    # --- edit as JSON --------------------------------------------------------

    def edit_json_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        workflow = self._version(request, object_id)
        initial = {"definition": _pretty_export(workflow)}
        form = EditJSONForm(request.POST or None, initial=initial)
        page = {"form": form, "action": "edit-json", "submit_label": "Save as a new version"}
        title = f"Edit {workflow} as JSON"
        if request.method != "POST" or not form.is_valid():
            return self._page(request, workflow, title, **page)
        try:
            created = workflow_edit_json(
                version=workflow, definition=form.cleaned_data["definition"], user=request.user
            )
        except DefinitionInvalid as exc:
            return self._page(request, workflow, title, issues=exc.issues, **page)
        except DefinitionUnchanged as exc:
            return self._page(request, workflow, title, problems=[exc.message], **page)
        except ApprovalForbidden as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return self._back(workflow)
        self.message_user(request, f"Saved as {created}, pending review.", messages.SUCCESS)
        return self._back(created)

    # --- run, archive, submit ------------------------------------------------

    def run_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        workflow = self._version(request, object_id)
        if not request.user.has_perm("runs.add_run"):
            self.message_user(request, "You may not start runs.", messages.ERROR)
            return self._back(workflow)
        if workflow.status != WorkflowStatus.ACTIVE:
            self.message_user(
                request,
                f"Not run: {workflow} is {workflow.status}; only an active (approved) "
                "version runs.",
                messages.ERROR,
            )
            return self._back(workflow)
        form = self._inputs_form(workflow, request.POST or None)
        page = {"form": form, "action": "run", "submit_label": "Run"}
        title = f"Run {workflow}"
        if request.method != "POST" or not form.is_valid():
            return self._page(request, workflow, title, **page)
        try:
            run = run_create(
                workflow=workflow,
                trigger=RunTrigger.MANUAL,
                inputs=form.inputs(),
                started_by=request.user,
            )
        except InputsInvalid as exc:
            return self._page(request, workflow, f"Run {workflow}", problems=exc.problems, **page)
        except WorkflowInvalid as exc:
            return self._page(
                request, workflow, f"Run {workflow}", issues=exc.report.errors, **page
            )
        try:
            run = run_enqueue(run=run)
        except FlowpilotError as exc:
            self.message_user(request, f"Run {run.pk} stopped: {exc.message}", messages.ERROR)
        else:
            self.message_user(request, *_run_message(run))
        return HttpResponseRedirect(reverse("admin:runs_run_change", args=[run.pk]))

    def _transition(self, request: HttpRequest, object_id: str, to: str, done: str) -> HttpResponse:
        workflow = self._version(request, object_id)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request, workflow):
            raise PermissionDenied
        try:
            workflow_transition(workflow=workflow, to=to, actor=request.user)
        except WorkflowTransitionError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(request, f"{done} {workflow}.", messages.SUCCESS)
        return self._back(workflow)

    def archive_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._transition(request, object_id, WorkflowStatus.ARCHIVED, "Archived")

    def submit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._transition(
            request, object_id, WorkflowStatus.PENDING_REVIEW, "Submitted for review:"
        )

    # --- new plan ------------------------------------------------------------

    def new_plan_view(self, request: HttpRequest) -> HttpResponse:
        from workflows.planner.services import plan_create, planner_llm_check  # on use only

        if not request.user.has_perm("workflows.add_workflow"):
            raise PermissionDenied
        if request.method == "POST" and "attempt" in request.POST:
            return self._answer_questions(request)
        form = NewPlanForm(request.POST or None)
        page = {"form": form, "action": "plan", "submit_label": "Plan it"}
        try:
            planner_llm_check()
        except LLMEndpointError as exc:  # say what to set; take no goal, send nothing
            return self._page(request, None, "New plan", problems=[exc.message], **page)
        if request.method != "POST" or not form.is_valid():
            return self._page(request, None, "New plan", **page)
        try:
            workflow = plan_create(
                goal=form.cleaned_data["goal"],
                sample_inputs=form.cleaned_data["sample_inputs"],
                owner=actor_user(request.user),
            )
        except PlanQuestions as exc:
            return self._questions_page(request, exc.attempt)
        except PlanError as exc:
            problems = [f"No plan: {exc.message}"]
            page["form"] = NewPlanForm(masked_post(request.POST))  # as stored: masked
            return self._page(request, None, "New plan", problems=problems, **page)
        return self._planned(request, workflow)

    def _answer_questions(self, request: HttpRequest) -> HttpResponse:
        """The answers to a question round: plan again with them (or show the next round)."""
        from workflows.planner.services import plan_answer  # the planner loads on use only

        raw = request.POST.get("attempt", "")
        attempt = (
            PlanAttempt.objects.filter(pk=int(raw), status=PlanAttemptStatus.QUESTIONS).first()
            if raw.isdigit() and len(raw) <= 18  # past that, no row has it (and no int64)
            else None
        )
        if attempt is None:
            raise Http404("no plan attempt with questions to answer")
        form = QuestionsForm(request.POST, questions=attempt.questions)
        if not form.is_valid():
            return self._questions_page(request, attempt, form=form)
        try:
            workflow = plan_answer(
                attempt=attempt, answers=form.answers(), owner=actor_user(request.user)
            )
        except PlanQuestions as exc:
            return self._questions_page(request, exc.attempt)
        except PlanError as exc:
            problems = [f"No plan: {exc.message}"]
            return self._questions_page(request, attempt, form=form, problems=problems)
        return self._planned(request, workflow)

    def _questions_page(
        self,
        request: HttpRequest,
        attempt: PlanAttempt,
        *,
        form: QuestionsForm | None = None,
        problems: Sequence[str] = (),
    ) -> TemplateResponse:
        form = form or QuestionsForm(initial={"attempt": attempt.pk}, questions=attempt.questions)
        count = len(attempt.questions)
        intro = (
            f"Before planning “{attempt.goal}”, the planner asks {count} "
            f"question{'s' if count != 1 else ''}. Choose a suggestion, say something else, "
            "or leave a question open to let it choose."
        )
        return self._page(
            request,
            None,
            "New plan: the planner asks",
            form=form,
            action="answer",
            submit_label="Answer and plan",
            intro=intro,
            problems=list(problems),
        )

    def _planned(self, request: HttpRequest, workflow: Workflow) -> HttpResponse:
        self.message_user(
            request, f"The planner proposed {workflow}; review it below.", messages.SUCCESS
        )
        return self._back(workflow)


def masked_post(data: QueryDict) -> QueryDict:
    """``data`` with every credential typed into its fields masked (``***``): a declared
    secret or a token shape (``tools.secrets.free_text_redactor``). A form shown again
    after the service refused or failed shows the free text as it would be stored,
    never a token as typed (docs/security.md, "Free text people type")."""
    kept = {"csrfmiddlewaretoken"}
    typed = [value for key, values in data.lists() if key not in kept for value in values]
    redactor = free_text_redactor(ToolRegistry.from_db(), os.environ, typed)
    masked = QueryDict(mutable=True)
    for key, values in data.lists():
        masked.setlist(key, values if key in kept else [redactor.scrub_text(v) for v in values])
    return masked
