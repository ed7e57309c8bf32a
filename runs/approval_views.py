"""The page a signed approval link opens (``/approvals/<token>/``): the approval page
without signing in — the link decides as the approver it was made for, once
(``runs.approval_links``). A link that cannot decide says why; nothing else is shown."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from runs.admin_approvals import approval_context, form_values, values_form
from runs.approval_links import ApprovalLinkInvalid, approval_link_decide, approval_link_read
from runs.approvals import approval_refusal
from tools.errors import FlowpilotError

LINK_TEMPLATE = "runs/approvalrequest/link.html"


def approval_link_view(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = approval_link_read(token)
    except ApprovalLinkInvalid as exc:
        return _page(request, {"title": "Approval link", "invalid": str(exc)}, status=404)
    approval = link.request
    refusal = approval_refusal(approval, link.user)
    if refusal is not None:  # no longer an approver, or decided elsewhere: show nothing
        return _page(request, {"title": "Approval link", "invalid": refusal}, status=403)
    values = values_form(approval.form, request.POST if request.method == "POST" else None)
    problem = None
    if request.method == "POST":
        approve = "_approve" in request.POST
        if not approve or values.is_valid():
            try:
                decided = approval_link_decide(
                    token=token,
                    approve=approve,
                    values=form_values(approval.form, values) if approve else None,
                    comment=request.POST.get("comment", "")[:2000],
                    preview_hash=request.POST.get("preview_hash", ""),
                )
            except FlowpilotError as exc:
                problem = str(exc)
            else:
                verb = "approved" if approve else "rejected"
                done = f"You {verb} `{decided.step_id}` of run {decided.run_id}. Thank you."
                context = {"title": "Approval recorded", "invalid": "This link is used up",
                           "approval_done": done}  # fmt: skip
                return _page(request, context)
        else:
            problem = "the values do not fit the form: see the fields below"
    context = approval_context(approval, user=link.user, values=values, problem=problem)
    context["deciding_as"] = link.user.get_username()
    return _page(request, context)


def _page(request: HttpRequest, context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    base = {"site_header": "flowpilot", "site_title": "flowpilot", "is_popup": False}
    return TemplateResponse(request, LINK_TEMPLATE, {**base, **context}, status=status)
