"""The run page's links for event triggers (a ``FLOWPILOT_RUN_LINK_PROVIDERS``
provider): a run an event started links the finished run that was the event (or, for
a poll's item, the event), and a run whose end started others links them (at most
``SHOWN``, then the events' list)."""

from __future__ import annotations

from django.urls import reverse

from runs.links import RunLink
from runs.models import Run, RunTrigger
from triggers.models import EventOutcome, TriggerEvent

SHOWN = 5


def _run_url(run_id: int) -> str:
    return reverse("admin:runs_run_change", args=[run_id])


def run_links(*, run: Run) -> list[RunLink]:
    links = []
    if run.trigger == RunTrigger.EVENT:
        event = TriggerEvent.objects.filter(run=run).select_related("source_run__workflow").first()
        if event is not None and event.source_run is None:  # a poll's item
            url = reverse("admin:triggers_triggerevent_change", args=[event.pk])
            item = event.event_key.removeprefix("item:")
            links.append(RunLink("started by", url, f"item {item[:120]} found by a poll trigger"))
        elif event is not None and event.source_run is not None:
            source = event.source_run
            text = (
                f"the end of run {source.pk} of {source.workflow.name} v{source.workflow.version}"
                f" ({source.status})"
            )
            links.append(RunLink("started by", _run_url(source.pk), text))
    started = list(
        TriggerEvent.objects.filter(source_run=run)
        .select_related("run__workflow")
        .order_by("id")[: SHOWN + 1]
    )
    for event in started[:SHOWN]:
        if event.run is not None:
            workflow = event.run.workflow.name
            text = f"run {event.run.pk} of {workflow} (its trigger on this workflow)"
            links.append(RunLink("started", _run_url(event.run.pk), text))
        elif event.outcome == EventOutcome.REFUSED:
            url = reverse("admin:triggers_triggerevent_change", args=[event.pk])
            links.append(RunLink("refused", url, f"{event.workflow_name}: {event.message[:200]}"))
    if len(started) > SHOWN:
        url = reverse("admin:triggers_triggerevent_changelist") + f"?source_run__id__exact={run.pk}"
        links.append(RunLink("events", url, "every run this run's end started"))
    return links
