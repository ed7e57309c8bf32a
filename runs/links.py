"""The links of a run page: its version, and what upper layers know about the run.

``runs`` may not import the layers above it (``review`` holds approvals and their
validation runs), so those links come from providers named in the setting
``FLOWPILOT_RUN_LINK_PROVIDERS`` (dotted paths, wired in ``config/settings.py``):
each is called as ``provider(run=run)`` and returns ``RunLink`` values. Admin URLs
are found by name with ``reverse``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse
from django.utils.module_loading import import_string

from runs.models import Run


@dataclass(frozen=True)
class RunLink:
    """One link of a run page: what it is (``label``), where it goes, how it reads."""

    label: str
    url: str
    text: str


def run_links(*, run: Run) -> list[RunLink]:
    """The run's version, its approval steps' requests (each time one waited), then
    every provider's links, in the setting's order."""
    workflow = run.workflow
    links = [
        RunLink(
            "version",
            reverse("admin:workflows_workflow_change", args=[workflow.pk]),
            f"{workflow.name} v{workflow.version} ({workflow.status})",
        ),
        RunLink(
            "runs of this version",
            reverse("admin:runs_run_changelist") + f"?workflow__id__exact={workflow.pk}",
            "all runs of this version",
        ),
    ]
    for request in run.approval_requests.order_by("created_at", "id"):
        links.append(
            RunLink(
                "approval",
                reverse("admin:runs_approvalrequest_change", args=[request.pk]),
                f"`{request.step_id}`: {request.get_status_display().lower()}",
            )
        )
    for path in getattr(settings, "FLOWPILOT_RUN_LINK_PROVIDERS", ()):
        links.extend(import_string(path)(run=run))
    return links
