"""The run page's links to approvals (a ``FLOWPILOT_RUN_LINK_PROVIDERS`` provider) and
the approval id of a run's root span (a ``FLOWPILOT_RUN_SPAN_PROVIDERS`` provider).

A validation run links to the approval it proved; any other run links to the
approval of the definition it ran (same version, same hash) and that approval's
validation run. Approvals are listed on the version's review page, each row
anchored ``#fp-approval-<id>``.
"""

from __future__ import annotations

from django.urls import reverse

from review.models import Approval, ApprovalKind, ApprovalStatus
from runs.links import RunLink
from runs.models import Run


def _approval_link(approval: Approval) -> RunLink:
    url = reverse("admin:workflows_workflow_change", args=[approval.workflow_id])
    who = approval.approved_by or "(deleted user)"
    when = approval.created_at.strftime("%Y-%m-%d %H:%M")
    if approval.kind == ApprovalKind.IMPORT_SUPERUSER:
        what = "activated by import, no validation run"
    else:
        what = approval.get_status_display().lower()
    return RunLink("approval", f"{url}#fp-approval-{approval.pk}", f"by {who} on {when} ({what})")


def approval_of(run: Run) -> Approval | None:
    """The approval a run ran under: the one it proved (a validation run), else one
    given before the run was made (an approval never covers runs made before it), of
    the same version and definition, a passed one first."""
    proved = Approval.objects.filter(validation_run=run).select_related("approved_by").first()
    if proved is not None:
        return proved
    approvals = Approval.objects.filter(
        workflow_id=run.workflow_id,
        definition_hash=run.definition_hash,
        created_at__lte=run.created_at,
    ).select_related("approved_by", "validation_run")
    return (
        approvals.filter(status=ApprovalStatus.PASSED).order_by("-created_at", "-id").first()
        or approvals.order_by("-created_at", "-id").first()
    )


def span_attributes(*, run: Run) -> dict[str, int]:
    """The run's root span's approval id (a ``FLOWPILOT_RUN_SPAN_PROVIDERS`` provider,
    ``runs.engine.finish``): the approval a validation run proved (whatever became of
    it), else the passed approval of the run's exact definition given before the run
    was made; none otherwise (a bare id must not name an approval that failed)."""
    proved = Approval.objects.filter(validation_run=run).values_list("pk", flat=True).first()
    if proved is None:
        proved = (
            Approval.objects.filter(
                workflow_id=run.workflow_id,
                definition_hash=run.definition_hash,
                created_at__lte=run.created_at,
                status=ApprovalStatus.PASSED,
            )
            .order_by("-created_at", "-id")
            .values_list("pk", flat=True)
            .first()
        )
    return {} if proved is None else {"flowpilot.approval_id": proved}


def run_links(*, run: Run) -> list[RunLink]:
    """The approval a run ran under (``approval_of``) and, for a run that did not prove
    it, that approval's validation run."""
    approval = approval_of(run)
    if approval is None:
        return []
    links = [_approval_link(approval)]
    if approval.validation_run_id == run.pk:
        return links
    validation = approval.validation_run
    if validation is not None:
        links.append(
            RunLink(
                "validation run",
                reverse("admin:runs_run_change", args=[validation.pk]),
                f"run {validation.pk} ({validation.status})",
            )
        )
    return links
