"""Workflow admin: the review page of a version, its actions, and the planner's audit trail.

It lives in ``review``, the top layer, because approving starts a validation run:
``review`` may import ``runs``, ``workflows`` and ``tools``, and none of them imports it.
The model is still ``workflows.Workflow``, so the pages stay under
``/admin/workflows/workflow/``; the templates are set explicitly below because they
live in this app (``review/templates/review/workflow/``).

The change page of a version shows the DAG as a picture (``graph.js`` on the
vendored dagre layout, data embedded with ``json_script``), the steps table with
mappings, the validator's issues against the current tool registry, the goal,
the approvals with their validation runs and the plan history. Its buttons POST
to the review views (``review.views``), wired here by ``get_urls``. A stored
definition never changes here: "Edit as JSON" saves a new version.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, OuterRef, Prefetch, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import ngettext

from review.forms import RejectForm
from review.models import ApprovalKind, ApprovalPolicy
from review.policy import (
    approval_policy_of,
    approval_tally,
    counting_approvals,
)
from review.selectors import workflow_review
from review.services import APPROVE_PERMISSION
from review.views import WorkflowReviewViews
from schedules.selectors import schedule_list
from tools.jsondata import PREVIEW_CHARS, json_preview
from tools.llm.prices import usd_text
from tools.permissions import PermissionRefused, actor_user
from workflows.models import (
    WORKFLOW_TRANSITIONS,
    PlanAttempt,
    Step,
    TemplateUse,
    Workflow,
    WorkflowStatus,
)
from workflows.schema import step_kind_names
from workflows.services import (
    CURATE_TEMPLATES_PERMISSION,
    WorkflowTransitionError,
    workflow_archive,
    workflow_export,
    workflow_set_template_use,
)


def pretty_json(value: Any) -> str:
    return format_html(
        "<pre class='fp-mono' style='white-space:pre-wrap'>{}</pre>",
        json_preview(value),
    )


@admin.register(Workflow)
class WorkflowAdmin(WorkflowReviewViews):
    change_form_template = "review/workflow/change_form.html"
    change_list_template = "review/workflow/change_list.html"
    list_display = (
        "name",
        "version",
        "status",
        "template_use",
        "step_count",
        "approvals",
        "approved_by",
        "created_at",
    )
    list_filter = ("status", "template_use")
    search_fields = ("name", "description", "goal")
    ordering = ("name", "-version")
    fieldsets = (
        (None, {"fields": ("name", "version", "status", "owner", "template_use")}),
        ("Schedules", {"fields": ("schedules",)}),
        (
            "Frozen definition",
            {
                "classes": ("collapse",),
                "fields": ("definition_hash", "pretty_definition"),
            },
        ),
        ("History", {"fields": ("approved_by", "approved_at", "created_at", "updated_at")}),
    )
    readonly_fields = (
        "name",
        "version",
        "status",
        "template_use",
        "definition_hash",
        "pretty_definition",
        "schedules",
        "approved_by",
        "approved_at",
        "created_at",
        "updated_at",
    )
    actions = ["archive", "mark_template", "exclude_template", "reset_template"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Workflow]:
        """With what the list's columns show, read for the whole page at once: the step
        count, the approver, the approval policy's fields and the counting approvals."""
        own = ApprovalPolicy.objects.filter(workflow_name=OuterRef("name"))
        steps = Step.objects.filter(workflow=OuterRef("pk")).order_by().values("workflow")
        return (
            super()
            .get_queryset(request)
            .select_related("approved_by")
            .annotate(
                listed_steps=Subquery(steps.annotate(n=Count("pk")).values("n")[:1]),
                policy_required=Subquery(own.values("approvals_required")[:1]),
                policy_author=Subquery(own.values("author_may_approve")[:1]),
            )
            .prefetch_related(
                Prefetch("approvals", queryset=counting_approvals(), to_attr="counting")
            )
        )

    @admin.display(description="steps")
    def step_count(self, obj: Workflow) -> int:
        listed = getattr(obj, "listed_steps", None)
        return obj.steps.count() if listed is None else listed

    @admin.display(description="schedules of this workflow")
    def schedules(self, obj: Workflow) -> str:
        """Each schedule of the name (they fire its active version), linked to its fire log."""
        rows = [
            (
                reverse("admin:schedules_schedule_change", args=[s.pk]),
                s.name,
                s.when,
                f"paused: {s.paused_reason}" if s.paused else "active",
            )
            for s in schedule_list(workflow_name=obj.name)
        ]
        add = reverse("admin:schedules_schedule_add") + f"?workflow_name={obj.name}"
        listed = format_html_join("", "<li><a href='{}'>{}</a> — {} — {}</li>", rows)
        return format_html("<ul>{}</ul><a href='{}'>Add a schedule</a>", listed, add)

    @admin.display(description="definition")
    def pretty_definition(self, obj: Workflow) -> str:
        return pretty_json(workflow_export(workflow=obj))  # field order, not the column's

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # versions come from files, the planner ("New plan") or the API

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        review = [
            path("plan/new/", view(self.new_plan_view), name=f"{name}_plan"),
            path("<path:object_id>/approve/", view(self.approve_view), name=f"{name}_approve"),
            path("<path:object_id>/reject/", view(self.reject_view), name=f"{name}_reject"),
            path("<path:object_id>/edit-json/", view(self.edit_json_view), name=f"{name}_edit"),
            path("<path:object_id>/run/", view(self.run_view), name=f"{name}_run"),
            path("<path:object_id>/archive/", view(self.archive_view), name=f"{name}_archive"),
            path("<path:object_id>/submit/", view(self.submit_view), name=f"{name}_submit"),
        ]
        return review + super().get_urls()

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {"can_plan": request.user.has_perm("workflows.add_workflow")}
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        workflow = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if workflow is not None:
            extra.update(self._review_context(request, workflow), title="Review workflow version")
        return super().change_view(request, object_id, form_url, extra)

    def _review_context(self, request: HttpRequest, workflow: Workflow) -> dict[str, Any]:
        review = workflow_review(workflow=workflow)
        status = workflow.status
        context = {
            "review": review,
            "graph_data": review.graph,
            "step_kinds": step_kind_names(),  # the graph's legend: every kind of the union
            "can_approve": request.user.has_perm(APPROVE_PERMISSION),
            "can_change": self.has_change_permission(request, workflow),
            "can_run": request.user.has_perm("runs.add_run"),
            "is_pending": status == WorkflowStatus.PENDING_REVIEW,
            "is_active": status == WorkflowStatus.ACTIVE,
            "is_draft": status == WorkflowStatus.DRAFT,
            "can_archive": WorkflowStatus.ARCHIVED in WORKFLOW_TRANSITIONS[WorkflowStatus(status)],
            # activated by `importflow --activate`: no review, no validation run
            "imported_activation": any(
                row.approval.kind == ApprovalKind.IMPORT_SUPERUSER for row in review.approvals
            ),
        }
        context.update(self._policy_links(request, workflow))
        if status in {WorkflowStatus.PENDING_REVIEW, WorkflowStatus.ACTIVE}:
            context["inputs_form"] = self._inputs_form(workflow)
        if status == WorkflowStatus.PENDING_REVIEW:
            context["reject_form"] = RejectForm()
        return context

    def _policy_links(self, request: HttpRequest, workflow: Workflow) -> dict[str, Any]:
        """Where a user with the permission edits this workflow's approval policy."""
        own = ApprovalPolicy.objects.filter(workflow_name=workflow.name).first()
        if own is not None:
            allowed = request.user.has_perm("review.change_approvalpolicy")
            url = reverse("admin:review_approvalpolicy_change", args=[own.pk])
        else:
            allowed = request.user.has_perm("review.add_approvalpolicy")
            url = reverse("admin:review_approvalpolicy_add") + f"?workflow_name={workflow.name}"
        return {"can_edit_policy": allowed, "policy_url": url}

    @admin.display(description="approvals")
    def approvals(self, obj: Workflow) -> str:
        """ "1 of 2 approvals (alice)" for a version in review; blank otherwise."""
        if obj.status != WorkflowStatus.PENDING_REVIEW:
            return ""
        if not hasattr(obj, "counting"):  # not read by get_queryset
            return approval_tally(version=obj).text()
        own = ApprovalPolicy(
            workflow_name=obj.name,
            approvals_required=getattr(obj, "policy_required", None),
            author_may_approve=getattr(obj, "policy_author", None),
        )
        return approval_tally(version=obj, policy=approval_policy_of(own), rows=obj.counting).text()

    @admin.action(description="Archive selected versions", permissions=["change"])
    def archive(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        done, refused = 0, []
        for workflow in queryset.order_by("name", "version"):
            try:
                workflow_archive(workflow=workflow, actor=request.user)
                done += 1
            except (WorkflowTransitionError, PermissionRefused) as exc:
                refused.append(exc.message)
        if done:
            self.message_user(
                request,
                ngettext("%d version archived.", "%d versions archived.", done) % done,
                messages.SUCCESS,
            )
        for message in refused:
            self.message_user(request, message, messages.WARNING)

    def has_curate_templates_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CURATE_TEMPLATES_PERMISSION)

    @admin.action(
        description="Mark as planner template (preferred)", permissions=["curate_templates"]
    )
    def mark_template(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._template_use(request, queryset, TemplateUse.PREFERRED, "marked as template")

    @admin.action(description="Exclude from planner templates", permissions=["curate_templates"])
    def exclude_template(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._template_use(request, queryset, TemplateUse.EXCLUDED, "excluded from templates")

    @admin.action(
        description="Planner templates: when similar (default)", permissions=["curate_templates"]
    )
    def reset_template(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._template_use(request, queryset, TemplateUse.AUTO, "left to similarity")

    def _template_use(
        self, request: HttpRequest, queryset: QuerySet[Workflow], use: str, done_words: str
    ) -> None:
        done = 0
        for workflow in queryset.order_by("name", "version"):
            workflow_set_template_use(workflow=workflow, use=use, actor=request.user)
            done += 1
        message = ngettext("%d version %s.", "%d versions %s.", done) % (done, done_words)
        self.message_user(request, message, messages.SUCCESS)


@admin.register(PlanAttempt)
class PlanAttemptAdmin(admin.ModelAdmin):
    """The planner's audit trail: every call, its prompt, reply and validator report."""

    list_display = ("id", "goal_short", "revision", "repair_round", "status", "workflow", "model")
    list_select_related = ("workflow",)
    list_filter = ("status", "model")
    search_fields = ("goal", "feedback", "workflow__name")
    date_hierarchy = "created_at"
    fields = (
        "goal",
        "workflow",
        "based_on",
        "revision",
        "repair_round",
        "repair_budget",
        "outcome",
        "feedback",
        "status",
        "error",
        "model",
        "offered_tools",
        "lessons",
        "templates",
        "pretty_questions",
        "pretty_clarifications",
        "sample_inputs",
        "usage",
        "cost",
        "pretty_report",
        "pretty_prompt",
        "reply",
        "created_by",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="goal")
    def goal_short(self, obj: PlanAttempt) -> str:
        return obj.goal if len(obj.goal) <= 60 else obj.goal[:59] + "…"

    @admin.display(description="cost")
    def cost(self, obj: PlanAttempt) -> str:
        """US dollars at the planner endpoint's prices when it answered (exact)."""
        if obj.cost_pico is None:
            return "unpriced (no price for its model, or recorded before costs were)"
        return f"${usd_text(obj.cost_pico)}"

    @admin.display(description="validator report")
    def pretty_report(self, obj: PlanAttempt) -> str:
        return pretty_json(obj.validator_report)

    @admin.display(description="questions asked")
    def pretty_questions(self, obj: PlanAttempt) -> str:
        return pretty_json(obj.questions)

    @admin.display(description="earlier questions and answers")
    def pretty_clarifications(self, obj: PlanAttempt) -> str:
        return pretty_json(obj.clarifications)

    @admin.display(description="prompt")
    def pretty_prompt(self, obj: PlanAttempt) -> str:
        return pretty_json(obj.prompt)

    @admin.display(description="raw reply")
    def reply(self, obj: PlanAttempt) -> str:
        """The reply as text, capped like every other record on an admin page."""
        text = obj.raw_reply
        if len(text) > PREVIEW_CHARS:
            text = f"{text[:PREVIEW_CHARS]}\n… [preview: {PREVIEW_CHARS} of {len(text)} characters]"
        return format_html("<pre class='fp-mono' style='white-space:pre-wrap'>{}</pre>", text)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PlanAttempt | None = None) -> bool:
        return False  # the audit trail is a record


@admin.register(ApprovalPolicy)
class ApprovalPolicyAdmin(admin.ModelAdmin):
    """A workflow's own approval policy; editing it needs ``review.change_approvalpolicy``
    (creating one ``review.add_approvalpolicy``). Blank fields follow the settings."""

    list_display = (
        "workflow_name",
        "approvals_required",
        "author_may_approve",
        "effective",
        "updated_by",
        "updated_at",
    )
    list_select_related = ("updated_by",)
    search_fields = ("workflow_name",)
    fields = (
        "workflow_name",
        "approvals_required",
        "author_may_approve",
        "effective",
        "updated_by",
        "updated_at",
    )
    readonly_fields = ("effective", "updated_by", "updated_at")

    @admin.display(description="in effect")
    def effective(self, obj: ApprovalPolicy) -> str:
        return approval_policy_of(obj).describe() if obj.pk else "—"

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, str | list[str]]:
        return {"workflow_name": request.GET.get("workflow_name", "")}

    def save_model(
        self, request: HttpRequest, obj: ApprovalPolicy, form: forms.ModelForm, change: bool
    ) -> None:
        obj.updated_by = actor_user(request.user)
        super().save_model(request, obj, form, change)
