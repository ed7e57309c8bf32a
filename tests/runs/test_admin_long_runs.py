"""The run page of a long run: the same queries whatever its steps, and the timeline
and the steps a page of ``STEPS_PER_PAGE`` at a time (counts, never times)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.admin import STEPS_PER_PAGE
from tests.factories import UserFactory, finished_run


@pytest.fixture
def root_client(client, db):
    client.force_login(UserFactory(username="root", superuser=True))
    return client


def _page(client, run, query: str = "") -> tuple[str, int]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/admin/runs/run/{run.pk}/change/{query}")
    assert response.status_code == 200
    return response.content.decode(), len(captured)


def _shown(html: str, section: str) -> list[str]:
    """The step ids of the timeline's rows or of the steps' cards, in page order."""
    pattern = {
        "timeline": r'class="fp-gantt-row[^"]*" role="row" data-step-id="([^"]+)"',
        "steps": r'<article class="fp-step [^"]*" data-step-id="([^"]+)"',
    }[section]
    return re.findall(pattern, html)


def test_the_queries_do_not_grow_with_the_steps(root_client):
    small, large = finished_run(3, name="small_flow"), finished_run(250, name="large_flow")
    _page(root_client, small)  # the first page of the process reads the session, etc.
    assert _page(root_client, small)[1] == _page(root_client, large)[1]


def test_a_long_run_shows_its_steps_a_page_at_a_time(root_client):
    run = finished_run(STEPS_PER_PAGE * 2 + 5)
    first, _ = _page(root_client, run)
    ids = [f"s{i:04d}" for i in range(STEPS_PER_PAGE * 2 + 5)]
    assert _shown(first, "timeline") == _shown(first, "steps") == ids[:STEPS_PER_PAGE]
    assert f"steps 1\u2013{STEPS_PER_PAGE} of {len(ids)}" in first
    assert 'href="?steps=2" rel="next"' in first
    assert 'rel="prev"' not in first
    assert f'<span class="fp-count" data-status="succeeded">{len(ids)} succeeded</span>' in first

    last, _ = _page(root_client, run, "?steps=3")
    assert _shown(last, "steps") == ids[2 * STEPS_PER_PAGE :]
    assert 'href="?steps=2" rel="prev"' in last
    assert 'rel="next"' not in last


def test_a_short_run_has_no_pages(root_client):
    html, _ = _page(root_client, finished_run(4))
    assert _shown(html, "steps") == ["s0000", "s0001", "s0002", "s0003"]
    assert "fp-steps-pages" not in html


@pytest.mark.parametrize("query", ["?steps=0", "?steps=99", "?steps=x"])
def test_a_page_out_of_range_shows_the_nearest(root_client, query):
    run = finished_run(STEPS_PER_PAGE + 1)
    html, _ = _page(root_client, run, query)
    assert _shown(html, "steps") in (["s0100"], [f"s{i:04d}" for i in range(STEPS_PER_PAGE)])
