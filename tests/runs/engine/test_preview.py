"""runs.engine.preview: the requests the steps after an approval that change something
will send — rendered as the tool would send them now, masked, sent to no one."""

from __future__ import annotations

import pytest

from runs.engine.preview import preview_hash
from runs.models import ApprovalRequest
from runs.services import run_create, run_execute
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    yield fake
    fake.stop()


def preview_of(flow: dict) -> list[dict]:
    run = run_execute(run=run_create(workflow=activate(flow), trigger="cli", inputs={}))
    assert run.status == "waiting", run.error_summary
    return ApprovalRequest.objects.get(run=run).preview


def test_a_get_after_the_approval_is_not_shown_only_what_changes_something(api):
    flow = refund_flow()
    flow["steps"].append(
        {"id": "read", "kind": "transform", "expression": "a", "input_mapping": {"a": "refund.ok"}}
    )
    flow["edges"].append({"from": "refund", "to": "read"})
    shown = preview_of(flow)
    assert [entry["step"] for entry in shown] == ["refund"]
    assert api.requests() == []


def test_a_step_that_cannot_be_rendered_says_why_masked(api, monkeypatch):
    from tools.errors import ToolInputError
    from tools.registry import ToolRegistry

    def refused(self, name, arguments, ctx):
        raise ToolInputError(f"refund: not sent with token {TOKEN}")

    monkeypatch.setattr(ToolRegistry, "call", refused)
    (entry,) = preview_of(refund_flow())
    assert entry["step"] == "refund"
    assert entry["error"] == "refund: not sent with token ***"
    assert "method" not in entry


def test_a_foreach_shows_its_first_items_call_and_how_many(api):
    flow = refund_flow()
    flow["steps"][2] = {
        "id": "refund",
        "kind": "foreach",
        "tool": "send_refund",
        "input_mapping": {"items": [1, 2, 3]},
        "item_mapping": {"refund": {"n": "$item"}},
    }
    (entry,) = preview_of(flow)
    assert (entry["item_count"], entry["method"], entry["body"]) == (3, "POST", {"n": 1})


def test_the_hash_names_the_preview():
    one = [{"step": "a", "body": {"x": 1, "y": 2}}]
    assert preview_hash(one) == preview_hash([{"body": {"y": 2, "x": 1}, "step": "a"}])
    assert preview_hash(one) != preview_hash([{"step": "a", "body": {"x": 2, "y": 2}}])
