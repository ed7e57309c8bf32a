"""The run page's links to approvals (a ``FLOWPILOT_RUN_LINK_PROVIDERS`` provider) and
the approval id of a run's root span (a ``FLOWPILOT_RUN_SPAN_PROVIDERS`` provider).

A validation run links to the approval it proved; any other run links to the
approval of the definition it ran (same version, same hash) and that approval's
validation run. Approvals are listed on the version's review page, each row
anchored ``#fp-approval-<id>``.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
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
    proved = _approval_id_of(run)
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


def _approval_id_of(run: Run) -> int | None:
    """``span_attributes``' one query, written out: every run's end asks it when
    tracing is on, and the ORM's compiling of its ``OR`` and ``CASE`` cost 0.3 ms more
    than the query itself on SQLite (the approval the run proved sorts first, then the
    newest passed one of its definition given before it was made)."""
    ops = connection.ops
    table, column = ops.quote_name(Approval._meta.db_table), ops.quote_name
    proved, workflow, hashed, created, status, id_ = (
        column(str(getattr(Approval._meta.get_field(name), "column", name)))
        for name in ("validation_run", "workflow", "definition_hash", "created_at", "status", "id")
    )
    # Names from the model's own metadata, quoted; every value a parameter.
    sql = (
        f"SELECT {id_} FROM {table} WHERE {proved} = %s OR ({workflow} = %s AND {hashed} = %s"  # noqa: S608
        f" AND {created} <= %s AND {status} = %s)"
        f" ORDER BY CASE WHEN {proved} = %s THEN 0 ELSE 1 END, {created} DESC, {id_} DESC LIMIT 1"
    )
    params: list[Any] = [
        run.pk, run.workflow_id, run.definition_hash,
        ops.adapt_datetimefield_value(run.created_at), str(ApprovalStatus.PASSED), run.pk,
    ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else int(row[0])
