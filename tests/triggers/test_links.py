"""triggers.links: a run an event started links the finished run that was the event;
a run whose end started others links them, and the refusals, on its page."""

from __future__ import annotations

import pytest

from runs.models import RunTrigger
from tests.factories import RunFactory
from triggers import links
from triggers.models import TriggerEvent

pytestmark = pytest.mark.django_db


def event(source, run=None, *, key="run:a", outcome="started", message=""):
    return TriggerEvent.objects.create(
        workflow_name="report", position=0, event_key=key, source_run=source, run=run,
        outcome=outcome, message=message,
    )  # fmt: skip


def test_the_started_run_links_its_cause_and_the_cause_links_what_it_started(admin_client):
    source = RunFactory(status="succeeded")
    child = RunFactory(trigger=RunTrigger.EVENT)
    event(source, child)
    event(source, key="run:b", outcome="refused", message="inputs invalid: `total` is required")

    (cause,) = links.run_links(run=child)
    assert cause.label == "started by"
    assert cause.url == f"/admin/runs/run/{source.pk}/change/"
    assert f"the end of run {source.pk} of {source.workflow.name}" in cause.text

    started, refused = links.run_links(run=source)
    assert (started.label, started.url) == ("started", f"/admin/runs/run/{child.pk}/change/")
    assert refused.label == "refused"
    assert "`total` is required" in refused.text

    page = admin_client.get(f"/admin/runs/run/{child.pk}/change/").content.decode()
    assert f"the end of run {source.pk}" in page


def test_many_started_runs_end_in_a_link_to_the_events_list(admin_client):
    source = RunFactory()
    for n in range(links.SHOWN + 2):
        event(source, RunFactory(trigger=RunTrigger.EVENT), key=f"run:{n}")
    found = links.run_links(run=source)
    assert [link.label for link in found] == ["started"] * links.SHOWN + ["events"]
    listed = admin_client.get(found[-1].url)
    assert listed.status_code == 200
    assert f"{links.SHOWN + 2} trigger events" in listed.content.decode()


def test_a_run_nothing_triggered_and_that_started_nothing_has_no_links():
    assert links.run_links(run=RunFactory()) == []


def test_a_run_a_polls_item_started_links_the_event_naming_the_item(admin_client):
    child = RunFactory(trigger=RunTrigger.EVENT)
    taken = event(None, child, key="item:<b>ord_42</b>")
    (cause,) = links.run_links(run=child)
    assert cause.label == "started by"
    assert cause.url == f"/admin/triggers/triggerevent/{taken.pk}/change/"
    assert cause.text == "item <b>ord_42</b> found by a poll trigger"
    page = admin_client.get(f"/admin/runs/run/{child.pk}/change/").content.decode()
    assert "item &lt;b&gt;ord_42&lt;/b&gt; found by a poll trigger" in page  # escaped
