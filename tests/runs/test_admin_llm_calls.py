"""The model calls in the admin (``runs/admin.py``, ``LLMCallAdmin``): a read-only list
with the run, tokens and cost of each call, and a summary per month and workflow."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from runs.models import LLMCall, LLMCallState
from tests.factories import LLMCallFactory, RunFactory, UserFactory
from tools.llm.prices import PICO

pytestmark = pytest.mark.django_db

LIST = "/admin/runs/llmcall/"
MONTHLY = "/admin/runs/llmcall/monthly/"


@pytest.fixture
def root_client(client):
    client.force_login(UserFactory(username="root", superuser=True))
    return client


@pytest.fixture
def viewer_client(client):
    """Staff with `runs.view_llmcall` only."""
    user = UserFactory(username="viewer", permissions=None)
    user.user_permissions.set([Permission.objects.get(codename="view_llmcall")])
    client.force_login(user)
    return client


def _month(year: int, month: int, day: int = 5) -> datetime:
    return datetime(year, month, day, 12, tzinfo=UTC)


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr class="fp-llm-month"[^>]*>(.*?)</tr>', html, re.S)


def _cells(row: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    ]


def test_the_list_shows_each_call_with_its_run_tokens_and_cost(root_client):
    run = RunFactory()
    LLMCallFactory(run=run, step_id="report", prompt_tokens=12_345, completion_tokens=67)
    LLMCallFactory(run=run, step_id="pick", kind="decision", model="local-model", cost_pico=None)
    LLMCallFactory(run=None, workflow_name="gone_flow", state=LLMCallState.RESERVED)

    response = root_client.get(LIST)

    assert response.status_code == 200
    html = response.content.decode()
    run_link = reverse("admin:runs_run_change", args=[run.pk])
    assert f"<a href='{run_link}'>run {run.pk} (sales_report v1, succeeded)</a>" in html
    assert "12,345 + 67" in html
    assert '<td class="field-cost">$0.01</td>' in html
    assert '<td class="field-cost">no price</td>' in html
    assert '<td class="field-cost">$0.01 (estimate)</td>' in html
    assert "gone_flow" in html
    assert f'href="{MONTHLY}" id="fp-llm-monthly-link"' in html  # the summary, linked
    for name in ("workflow_name", "state", "kind", "endpoint"):  # the filters
        assert f"?{name}=" in html or f"?{name}__exact=" in html, name
    assert "created_at__year=" in html  # the date hierarchy


def test_the_list_filters_by_workflow_and_escapes_values(root_client):
    LLMCallFactory(workflow_name="<b>bold</b>", model="<script>alert(1)</script>", run=None)
    LLMCallFactory(workflow_name="other_flow", run=None)

    html = root_client.get(LIST, {"workflow_name": "<b>bold</b>"}).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html
    assert "1 LLM call" in html  # the filtered count
    assert "other_flow</td>" not in html


def test_no_call_can_be_added_changed_or_deleted(root_client):
    call = LLMCallFactory()
    change = reverse("admin:runs_llmcall_change", args=[call.pk])
    delete = reverse("admin:runs_llmcall_delete", args=[call.pk])

    assert root_client.get(reverse("admin:runs_llmcall_add")).status_code == 403
    page = root_client.get(change)
    assert page.status_code == 200  # read-only
    assert 'name="_save"' not in page.content.decode()
    assert root_client.post(change, {"model": "changed", "cost_pico": 0}).status_code == 403
    assert root_client.get(delete).status_code == 403
    assert root_client.post(delete, {"post": "yes"}).status_code == 403
    bulk = root_client.post(LIST, {"action": "delete_selected", "_selected_action": [call.pk]})
    assert bulk.status_code == 200  # no such action: the list again, nothing deleted
    assert LLMCall.objects.get(pk=call.pk).model == "gpt-4o-mini"


def test_a_viewer_reads_the_list_and_the_summary_and_changes_nothing(viewer_client):
    call = LLMCallFactory()

    assert viewer_client.get(LIST).status_code == 200
    assert viewer_client.get(MONTHLY).status_code == 200
    assert viewer_client.get(reverse("admin:runs_llmcall_add")).status_code == 403
    change = reverse("admin:runs_llmcall_change", args=[call.pk])
    assert viewer_client.post(change, {"model": "changed"}).status_code == 403
    delete = reverse("admin:runs_llmcall_delete", args=[call.pk])
    assert viewer_client.post(delete, {"post": "yes"}).status_code == 403
    assert LLMCall.objects.filter(pk=call.pk, model="gpt-4o-mini").exists()


def test_staff_without_the_view_permission_gets_no_summary(client):
    client.force_login(UserFactory(username="reviewer"))  # staff, no llmcall permission

    assert client.get(MONTHLY).status_code == 403
    assert client.get(LIST).status_code == 403


def test_the_monthly_summary_sums_each_workflow_s_month(root_client):
    for day in (3, 4):
        LLMCallFactory(run=None, workflow_name="alpha", created_at=_month(2026, 11, day))
    LLMCallFactory(
        run=None,
        workflow_name="alpha",
        created_at=_month(2026, 10),
        prompt_tokens=2_000_000,
        completion_tokens=1_500,
        cost_pico=3 * PICO // 2,  # $1.50
    )
    LLMCallFactory(run=None, workflow_name="beta", created_at=_month(2026, 11), cost_pico=None)
    LLMCallFactory(
        run=None,
        workflow_name="beta",
        created_at=_month(2026, 11),
        state=LLMCallState.RESERVED,
        cost_pico=123,
    )
    LLMCallFactory(  # an answer without usage: charged at its estimate
        run=None,
        workflow_name="gamma",
        created_at=_month(2026, 11),
        prompt_tokens=0,
        completion_tokens=0,
        usage_reported=False,
        cost_pico=PICO // 1000,
    )

    response = root_client.get(MONTHLY)

    assert response.status_code == 200
    rows = [_cells(row) for row in _rows(response.content.decode())]
    assert rows == [
        ["2026-11", "alpha", "2", "200", "20", "$0.0200", ""],
        [
            "2026-11",
            "beta",
            "2",
            "200",
            "20",
            "$0.0001",
            "1 at a model with no price; 1 in flight, at their estimate",
        ],
        ["2026-11", "gamma", "1", "0", "0", "$0.0010", "1 charged at their estimate"],
        ["2026-10", "alpha", "1", "2,000,000", "1,500", "$1.5000", ""],
    ]
    html = response.content.decode()
    assert 'title="$0.000000000123 exactly"' in html
    link = f"{LIST}?workflow_name=alpha&amp;created_at__year=2026&amp;created_at__month=10"
    assert f'<a href="{link}">alpha</a>' in html


def test_the_monthly_summary_shows_one_workflow(root_client):
    LLMCallFactory(run=None, workflow_name="alpha", created_at=_month(2026, 11))
    LLMCallFactory(run=None, workflow_name="beta", created_at=_month(2026, 11))

    html = root_client.get(MONTHLY, {"workflow": "beta"}).content.decode()

    assert [_cells(row)[1] for row in _rows(html)] == ["beta"]
    assert '<option value="beta" selected>beta</option>' in html
    assert '<option value="alpha">alpha</option>' in html
    none = root_client.get(MONTHLY, {"workflow": "gamma"}).content.decode()
    assert _rows(none) == []
    assert "No model calls of gamma." in none


def test_the_monthly_summary_escapes_workflow_names(root_client):
    LLMCallFactory(run=None, workflow_name="<img src=x onerror=alert(1)>")

    html = root_client.get(MONTHLY, {"workflow": "<script>x</script>"}).content.decode()
    everything = root_client.get(MONTHLY).content.decode()

    assert "<script>x</script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
    assert "<img src=x" not in everything
    assert "&lt;img src=x onerror=alert(1)&gt;" in everything
