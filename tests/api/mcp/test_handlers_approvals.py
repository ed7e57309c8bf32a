"""The MCP server's approval tools: list what waits for the token's person, decide it
as them; the same refusals as the API."""

from __future__ import annotations

import pytest
from rest_framework import exceptions

from api.mcp import handlers
from runs.approvals import ApprovalRefused
from runs.models import ApprovalRequest, Run
from runs.services import run_create, run_execute
from tests.api.mcp.conftest import agent
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)
VIEW = "runs.view_approvalrequest"


@pytest.fixture
def waiting(monkeypatch):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    run = run_execute(run=run_create(workflow=activate(refund_flow()), trigger="mcp", inputs={}))
    yield run, ApprovalRequest.objects.get(run=run)
    fake.stop()


def test_an_agent_lists_its_approvals_and_approves_as_its_person(waiting):
    run, request = waiting
    bob = agent(VIEW, username="bob")
    listed = handlers.list_approvals(user=bob, mine=True, limit=10)
    assert [a["id"] for a in listed["approvals"]] == [request.pk]
    assert listed["approvals"][0]["preview"][0]["method"] == "POST"
    decided = handlers.decide_approval(
        user=bob, approval_id=request.pk, approve=True, values={"note": "via mcp"},
        comment="", preview_hash=request.preview_hash,
    )  # fmt: skip
    assert decided["status"] == "approved"
    assert decided["decisions"][0]["via"] == "mcp"
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_refusals_are_the_apis(waiting):
    _, request = waiting
    mallory = agent(VIEW, username="mallory")
    assert handlers.list_approvals(user=mallory, mine=True, limit=10)["approvals"] == []
    with pytest.raises(ApprovalRefused):
        handlers.decide_approval(user=mallory, approval_id=request.pk, approve=False,
                                 values=None, comment="no", preview_hash="")  # fmt: skip
    with pytest.raises(exceptions.NotFound):
        handlers.decide_approval(user=mallory, approval_id=999999, approve=False,
                                 values=None, comment="", preview_hash="")  # fmt: skip
    with pytest.raises(exceptions.PermissionDenied):
        handlers.list_approvals(user=agent(username="nobody"), mine=False, limit=10)
    with pytest.raises(exceptions.ValidationError):
        handlers.list_approvals(user=mallory, mine=False, limit=0)


def test_an_agent_decides_over_the_real_server(mcp_http, waiting):
    from tests.api.mcp.conftest import calls, over_http, token_of

    run, request = waiting
    token = token_of(agent(VIEW, username="alice"))
    listed, decided = over_http(
        mcp_http,
        token,
        calls(
            ("list_approvals", {}),
            (
                "decide_approval",
                {"approval_id": request.pk, "approve": True, "values": {"note": "over mcp"},
                 "preview_hash": request.preview_hash},
            ),
        ),
    )  # fmt: skip
    assert [a["id"] for a in listed.structured_content["approvals"]] == [request.pk]
    assert decided.structured_content["status"] == "approved"
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    (refused,) = over_http(
        mcp_http, token, calls(("decide_approval", {"approval_id": request.pk, "approve": False}))
    )
    assert refused.is_error
    assert refused.structured_content["code"] == "approval_decided"
