"""Approval requests in the admin: the list of those waiting for the signed-in person
(its default), and the approval page — the run, what the step was given, the exact
requests the next steps will send (masked), the decisions so far, and the form to
approve (with the step's form values) or reject. Deciding goes through
``runs.approvals.approval_decide``, the one service every surface uses."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from runs.approvals import approval_decide, approval_refusal, approvals_pending_for
from runs.models import ApprovalRequest, ApprovalStatus
from tools.errors import FlowpilotError
from tools.jsondata import store_unescape

DECIDE_TEMPLATE = "runs/approvalrequest/decide.html"


class WaitingForFilter(admin.SimpleListFilter):
    """The requests the signed-in person may decide now (the list's default), or all."""

    title = "waiting for"
    parameter_name = "for"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("me", "me"), ("all", "anyone")]

    def value(self) -> str:
        return super().value() or "me"

    def choices(self, changelist: Any) -> Any:
        for value, label in self.lookup_choices:
            yield {
                "selected": self.value() == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() != "me":
            return queryset
        return queryset.filter(pk__in=[r.pk for r in approvals_pending_for(request.user)])


def values_form(schema: dict[str, Any] | None, data: Any = None) -> forms.Form:
    """A form of the step's values: one field per property of its JSON Schema (text,
    number, yes/no, a choice; anything else as JSON)."""
    form = forms.Form(data=data, prefix="value")
    properties = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        kind, options = spec.get("type"), spec.get("enum")
        common: dict[str, Any] = {
            "required": name in required and kind != "boolean",
            "help_text": spec.get("description", ""),
            "initial": spec.get("default"),
            "label": spec.get("title") or name,
        }
        if options:
            field: forms.Field = forms.ChoiceField(
                choices=[(json.dumps(o), str(o)) for o in options], **common
            )
            common["initial"] = json.dumps(spec["default"]) if "default" in spec else None
            field.initial = common["initial"]
        elif kind == "string":
            field = forms.CharField(**common)
        elif kind == "integer":
            field = forms.IntegerField(**common)
        elif kind == "number":
            field = forms.FloatField(**common)
        elif kind == "boolean":
            field = forms.BooleanField(**common)
        else:
            field = forms.JSONField(**common)
        form.fields[name] = field
    return form


def form_values(schema: dict[str, Any] | None, form: forms.Form) -> dict[str, Any]:
    """The values a valid form gives, as the schema's types (a choice read back as JSON;
    an empty optional field left out)."""
    properties = (schema or {}).get("properties") or {}
    values = {}
    for name, value in form.cleaned_data.items():
        if isinstance(form.fields[name], forms.ChoiceField) and isinstance(value, str):
            value = json.loads(value) if value else None
        if value in (None, "") and properties.get(name, {}).get("type") != "boolean":
            continue
        values[name] = value
    return values


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = ("__str__", "workflow", "status", "given", "created_at", "expires_at")
    list_select_related = ("run__workflow",)
    list_filter = (WaitingForFilter, "status")
    search_fields = ("step_id", "run__workflow__name")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApprovalRequest]:
        return super().get_queryset(request).prefetch_related("decisions")

    @admin.display(description="workflow")
    def workflow(self, obj: ApprovalRequest) -> str:
        return str(obj.run.workflow)

    @admin.display(description="approved by")
    def given(self, obj: ApprovalRequest) -> str:
        given = sum(1 for d in obj.decisions.all() if d.approved)
        return f"{given} of {obj.required}"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The approval page: what is about to happen, and the decision."""
        approval = (
            ApprovalRequest.objects.select_related("run__workflow", "step_result")
            .filter(pk=object_id)
            .first()
        )
        if approval is None or not self.has_view_permission(request, approval):
            raise Http404("no such approval request")
        values = values_form(approval.form, request.POST if request.method == "POST" else None)
        problem = None
        if request.method == "POST":
            approve = "_approve" in request.POST
            if not approve or values.is_valid():
                try:
                    approval_decide(
                        request_id=approval.pk,
                        user=request.user,
                        approve=approve,
                        values=form_values(approval.form, values) if approve else None,
                        comment=request.POST.get("comment", "")[:2000],
                        preview_hash=request.POST.get("preview_hash", ""),
                        via="admin",
                    )
                except FlowpilotError as exc:
                    problem = str(exc)
                else:
                    verb = "Approved" if approve else "Rejected"
                    self.message_user(request, f"{verb}: {approval}.", messages.SUCCESS)
                    url = reverse("admin:runs_approvalrequest_change", args=[approval.pk])
                    return HttpResponseRedirect(url)
            else:
                problem = "the values do not fit the form: see the fields below"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            **approval_context(approval, user=request.user, values=values, problem=problem),
            "run_url": reverse("admin:runs_run_change", args=[approval.run_id]),
            **(extra_context or {}),
        }
        return TemplateResponse(request, DECIDE_TEMPLATE, context)


def approval_context(
    approval: ApprovalRequest, *, user: Any, values: forms.Form, problem: str | None
) -> dict[str, Any]:
    """What the approval page shows of ``approval`` to ``user`` (the admin's page and a
    signed link's page share it)."""
    decisions = list(approval.decisions.all())
    return {
        "title": f"Approve `{approval.step_id}` of run {approval.run_id}",
        "approval": approval,
        "pending": approval.status == ApprovalStatus.PENDING,
        "refusal": approval_refusal(approval, user),
        "values": values,
        "problem": problem,
        "step_inputs": _pretty(store_unescape(approval.step_result.inputs)),
        "preview": [_shown(entry) for entry in approval.preview or []],
        "decisions": decisions,
        "given": sum(1 for d in decisions if d.approved),
    }


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    """A preview entry as the page shows it: its body and headers as indented JSON."""
    body = entry.get("body")
    return {
        **entry,
        "body_text": body if isinstance(body, str) else (_pretty(body) if body is not None else ""),
        "headers_text": _pretty(entry.get("headers") or {}),
    }
