"""What a version's rate limits imply, on the review page before approval."""

from __future__ import annotations

import pytest

from review.limits import duration, rate_limit_notes
from tests.factories import PASSWORD, WorkflowFactory
from tools.loader import load_tool_text
from tools.registry import ToolRegistry
from tools.services import tool_upsert
from workflows.models import WorkflowStatus
from workflows.schema import WorkflowSpec

TOOLS = """
- name: update_contact
  base_url: https://crm.example.com
  request: {method: PUT, url: "/contacts/{{id}}"}
  inputs: {type: object, properties: {id: {type: string}}, required: [id]}
  rate_limit: {requests: 10, per: 1}
- name: get_account
  base_url: https://crm.example.com
  request: {method: GET, url: "/accounts/{{id}}"}
  inputs: {type: object, properties: {id: {type: string}}, required: [id]}
  rate_limit: {requests: 100, per: 60, burst: 10, key: tool}
- name: free_call
  base_url: https://free.example.com
  request: {method: GET, url: "/x"}
"""


def flow(items) -> dict:
    return {
        "name": "sync_contacts",
        "goal": "Update every contact.",
        "inputs": {"ids": {"type": "array", "default": [f"c{i}" for i in range(1000)]}},
        "steps": [
            {"id": "account", "kind": "tool", "tool": "get_account", "input_mapping": {"id": "a1"}},
            {
                "id": "each",
                "kind": "foreach",
                "tool": "update_contact",
                "input_mapping": {"items": items},
                "item_mapping": {"id": "$item"},
            },
            {"id": "free", "kind": "tool", "tool": "free_call", "input_mapping": {}},
        ],
        "outputs": {"count": "each.count"},
    }


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(load_tool_text(TOOLS))


def test_a_foreach_over_known_items_says_the_least_time(registry):
    spec = WorkflowSpec.model_validate(flow("$input.ids"))
    notes = rate_limit_notes(spec=spec, registry=registry, inputs={"ids": ["x"] * 1000})
    assert [(n.step_id, n.tool, n.limit, n.implies) for n in notes] == [
        (
            "account",
            "get_account",
            "100 per 60 s by tool, burst 10",
            "one call, at most 100 per 60 s",
        ),
        ("each", "update_contact", "10 per 1 s by host", "1,000 items at 10/s: at least 100 s"),
    ]


def test_literal_items_count_and_unknown_items_give_the_rate(registry):
    literal = WorkflowSpec.model_validate(flow(["a", "b", "c"]))
    notes = rate_limit_notes(spec=literal, registry=registry, inputs={})
    assert notes[1].implies == "3 items at 10/s: at least 1 s"
    unknown = WorkflowSpec.model_validate(flow("account.items"))
    notes = rate_limit_notes(spec=unknown, registry=registry, inputs={})
    assert notes[1].implies == "one call per item at 10/s: N items take at least N / 10 s"


def test_durations_read_naturally():
    assert [duration(s) for s in (5, 100, 1500, 9000)] == ["5 s", "100 s", "25 min", "2.5 h"]


@pytest.mark.django_db
def test_the_review_page_shows_them_before_approval(approver, client):
    for spec in load_tool_text(TOOLS, source="test_limits"):
        tool_upsert(spec=spec, source="test_limits")
    version = WorkflowFactory(data=flow("$input.ids"), status=WorkflowStatus.PENDING_REVIEW)
    assert client.login(username=approver.username, password=PASSWORD)

    page = client.get(f"/admin/workflows/workflow/{version.pk}/change/").content.decode()

    assert 'id="fp-rate-limits"' in page
    assert "1,000 items at 10/s: at least 100 s" in page  # from the input's default
    assert "free_call" not in page.split('id="fp-rate-limits"')[1].split("</table>")[0]
