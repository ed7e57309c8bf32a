"""The run admin's operation pages, mixed into ``RunAdmin`` (wired by its ``get_urls``):
restart a finished run from a step, and replay a validation run's version offline.

Each parses a form, calls one service and reports; permissions are enforced by the
services (``runs.operate_run``), so a forged POST is refused the same way.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from runs.engine.kinds.loop import restart_points
from runs.forms import RestartForm
from runs.models import Run
from runs.restart import restart_versions, run_restart
from runs.state import RunTrigger
from tools.errors import FlowpilotError
from workflows.graph import build_graph
from workflows.models import Workflow
from workflows.services import workflow_spec

OPERATE_TEMPLATE = "runs/run/operate.html"


def run_change_url(run: Run) -> str:
    return reverse("admin:runs_run_change", args=[run.pk])


class RunOperationViews(admin.ModelAdmin):
    """Restart and replay pages of ``RunAdmin`` (a model admin of runs)."""

    def _run(self, request: HttpRequest, object_id: str) -> Run:
        run = Run.objects.select_related("workflow").filter(pk=object_id).first()
        if run is None or not self.has_view_permission(request, run):
            raise Http404(f"no run {object_id}")
        return run

    def _operate_page(
        self, request: HttpRequest, run: Run, title: str, **context: Any
    ) -> HttpResponse:
        page = {**self.admin_site.each_context(request), "opts": self.opts}
        page.update(original=run, title=title, **context)
        return TemplateResponse(request, OPERATE_TEMPLATE, page)

    def restart_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        run = self._run(request, object_id)
        offered = restart_versions(run)
        own_spec = workflow_spec(run.workflow)
        # The run's own version offers its loops' iterations too (`review#2`).
        steps = list(restart_points(run, own_spec, build_graph(own_spec).order))
        for version in offered:
            steps += [s for s in build_graph(workflow_spec(version)).order if s not in steps]
        versions = [(v.version, _version_label(run, v)) for v in offered]
        own = run.workflow.version
        form = RestartForm(request.POST or None, steps=tuple(steps), versions=versions, own=own)
        page = {
            "form": form,
            "action": "restart",
            "submit_label": "Restart as a new run",
            "intro": "A new run with the same inputs, linked to this one: of the same version, "
            "or of another active version of its workflow.",
        }
        title = f"Restart run {run.pk}"
        if request.method != "POST" or not form.is_valid():
            return self._operate_page(request, run, title, **page)
        chosen = form.version()
        onto = next((v for v in offered if v.version == chosen), run.workflow)
        try:
            again = run_restart(
                run=run,
                from_step=form.step(),
                confirm_non_idempotent=form.cleaned_data["confirm_non_idempotent"],
                trigger=RunTrigger.MANUAL,
                actor=request.user,
                version=None if onto.pk == run.workflow_id else onto,
            )
        except FlowpilotError as exc:
            return self._operate_page(request, run, title, problem=exc.message, **page)
        where = (
            f"step `{again.restarted_from_step}`" if again.restarted_from_step else "the trigger"
        )
        if again.workflow_id != run.workflow_id:
            where += f", onto v{again.workflow.version}"
        self.message_user(
            request,
            f"Run {again.pk} restarts run {run.pk} from {where}: {again.status}.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(run_change_url(again))

    def replay_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """GET: what a replay does; POST: replay the run's version against this
        validation run's recordings and show the report."""
        run = self._run(request, object_id)
        title = f"Replay {run.workflow} against run {run.pk}"
        page = {
            "form": forms.Form(),
            "action": "replay",
            "submit_label": "Replay offline",
            "intro": "Runs this version again with every HTTP, MCP and LLM call answered from "
            "this validation run's recordings (nothing is sent, no file is written), then "
            "compares each step.",
        }
        if request.method != "POST":
            return self._operate_page(request, run, title, **page)
        from runs.replay.services import version_replay  # loaded by a replay only

        try:
            report = version_replay(version=run.workflow, validation_run=run, actor=request.user)
        except FlowpilotError as exc:
            return self._operate_page(request, run, title, problem=exc.message, **page)
        return self._operate_page(request, run, title, report=report, replay_run=report.replay_run)


def _version_label(run: Run, version: Workflow) -> str:
    if version.pk == run.workflow_id:
        return f"v{version.version} (the run's own, {version.get_status_display().lower()})"
    return f"v{version.version} ({version.get_status_display().lower()})"
