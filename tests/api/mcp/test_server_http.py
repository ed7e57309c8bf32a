"""flowpilot's MCP server over streamable HTTP, driven by the SDK's client: the design
phase and a run end to end, and every refusal the REST API would give."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from review.services import workflow_approve
from runs.models import Run
from tests.api.mcp.conftest import AGENT_PERMS, agent, calls, over_http, token_of
from tests.factories import DIGEST_GOAL, UserFactory, digest_plan
from workflows.models import Workflow

# Its subject is not the database: the PostgreSQL pass leaves it to the SQLite pass.
pytestmark = pytest.mark.one_database


def body(result) -> dict:
    """The structured answer, the same as the JSON text beside it."""
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def test_an_agent_plans_a_person_approves_the_agent_runs_and_reads(
    mcp_http, planner_llm, output_dir, example_tools
):
    planner_llm.reply_json(digest_plan())
    token = token_of(agent(*AGENT_PERMS))

    listed, planned = over_http(
        mcp_http,
        token,
        calls(
            ("list_tools", {"search": "csv"}),
            ("plan_workflow", {"goal": DIGEST_GOAL, "sample_inputs": {"threshold": 10}}),
        ),
    )

    assert not listed.is_error
    assert "csv_read" in [t["name"] for t in body(listed)["tools"]]
    plan = body(planned)
    assert (plan["status"], plan["workflow"]["name"]) == ("succeeded", "sales_digest")
    assert plan["workflow"]["status"] == "pending_review"  # never approved by the agent
    version = Workflow.objects.get(name="sales_digest", version=plan["workflow"]["version"])

    workflow_approve(
        version=version,
        approved_by=UserFactory(username="human", approver=True),
        sample_inputs={"threshold": 1},
    )

    ran, read = over_http(
        mcp_http,
        token,
        calls(
            ("run_workflow", {"workflow": "sales_digest", "inputs": {"threshold": 5}, "wait": 30}),
            ("list_workflows", {"name": "sales_digest", "status": "active"}),
        ),
    )
    run = body(ran)
    assert run["status"] == "succeeded", run
    assert (run["trigger"], run["inputs"]["threshold"]) == ("mcp", 5)
    assert {s["step_id"]: s["status"] for s in run["steps"]}["report"] == "succeeded"
    assert [w["version"] for w in body(read)["workflows"]] == [version.version]

    (got,) = over_http(mcp_http, token, calls(("get_run", {"run_id": run["id"]})))
    assert body(got)["outputs"] == run["outputs"]
    assert body(got)["steps"] == run["steps"]
    assert Run.objects.get(pk=run["id"]).status == "succeeded"
    assert (output_dir / "digest.html").exists()


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "not_authenticated"),
        ("Token not-a-token", "authentication_failed"),
        ("Bearer abc", "not_authenticated"),
        ("Token two words", "authentication_failed"),
    ],
)
def test_a_request_without_a_valid_token_is_refused_before_mcp(mcp_http, header, code):
    headers = {"Accept": "application/json, text/event-stream"}
    if header:
        headers["Authorization"] = header
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}

    response = httpx.post(mcp_http, json=initialize, headers=headers, timeout=10)

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"
    assert response.json()["code"] == code


def test_the_sdk_client_without_a_token_cannot_even_connect(mcp_http):
    with pytest.raises(BaseExceptionGroup) as caught:
        over_http(mcp_http, None, calls(("list_tools", {})))

    assert caught.group_contains(MCPError, match="error response", depth=2)


def test_an_inactive_users_token_is_refused(mcp_http):
    user = agent(*AGENT_PERMS)
    token = token_of(user)
    user.is_active = False
    user.save()

    response = httpx.post(mcp_http, json={}, headers={"Authorization": f"Token {token}"})

    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"


def test_each_tool_needs_the_permission_the_api_action_needs(mcp_http, example_tools):
    token = token_of(agent("runs.view_run", "workflows.view_workflow"))

    results = over_http(
        mcp_http,
        token,
        calls(
            ("run_workflow", {"workflow": "sales_report"}),
            ("plan_workflow", {"goal": "anything"}),
            ("list_tools", {}),
            ("list_workflows", {}),
        ),
    )

    refused = [body(r) for r in results[:3]]
    assert all(r.is_error for r in results[:3])
    assert [(b["code"], b["status"]) for b in refused] == [("permission_denied", 403)] * 3
    assert not results[3].is_error  # workflows.view_workflow is enough to list them
    assert not Run.objects.exists()


def test_a_version_that_is_not_active_does_not_run(mcp_http):
    from tests.factories import WorkflowFactory

    WorkflowFactory(status="pending_review")
    token = token_of(agent(*AGENT_PERMS))

    by_version, newest = over_http(
        mcp_http,
        token,
        calls(
            ("run_workflow", {"workflow": "sales_report", "version": 1}),
            ("run_workflow", {"workflow": "sales_report"}),
        ),
    )

    for answer in (by_version, newest):
        refused = body(answer)
        assert (refused["code"], refused["status"]) == ("workflow_not_active", 409)
        assert "v1 is pending_review, not active" in refused["message"]
        assert refused["details"] == [
            {
                "path": "version",
                "code": "workflow_not_active",
                "message": "v1 is pending_review, not active",
                "status": "pending_review",
            }
        ]
    assert "has no active version" in body(newest)["message"]
    assert not Run.objects.exists()


def test_hostile_arguments_get_clear_errors_and_the_server_keeps_answering(mcp_http):
    token = token_of(agent(*AGENT_PERMS))
    huge = "x" * 200_000

    results = over_http(
        mcp_http,
        token,
        calls(
            ("run_workflow", {"workflow": "nope"}),
            ("run_workflow", {"workflow": "x", "wait": "soon"}),
            ("run_workflow", {"workflow": huge}),
            ("get_run", {"run_id": "abc"}),
            ("get_run", {"run_id": 999_999}),
            ("plan_workflow", {"goal": huge}),
            ("plan_workflow", {"goal": "   "}),
            ("run_workflow", {"workflow": "x", "inputs": {"a\x00": 1}}),
            ("validate_workflow", {}),
            ("validate_workflow", {"source": "steps: [unclosed"}),
            ("list_workflows", {"status": "bogus"}),
            ("list_tools", {"limit": 0}),
            ("no_such_tool", {}),
            ("list_tools", {}),
        ),
    )

    *refused, alive = results
    assert all(r.is_error for r in refused), [r.content for r in refused]
    assert not alive.is_error
    texts = [r.content[0].text for r in refused]
    assert body(refused[0])["message"] == "no stored workflow named `nope`"
    assert "wait\n  Input should be a valid number" in texts[1]
    assert "workflow\n  String should have at most 100 characters" in texts[2]
    assert "run_id" in texts[3]
    assert body(refused[4])["code"] == "not_found"
    assert body(refused[5])["details"][0]["path"] == "goal"
    assert body(refused[6])["code"] in ("invalid", "plan_error")
    assert body(refused[7])["code"] == "parse_error"
    assert body(refused[8])["message"] == "give exactly one of `definition` and `source`"
    assert body(refused[9])["code"] != "internal_error"
    assert body(refused[10])["details"][0]["path"] == "status"
    assert "limit" in texts[11]
    assert "no_such_tool" in texts[12]
    assert not Run.objects.exists()


def test_validate_workflow_answers_the_validators_issues_as_data(mcp_http, example_tools):
    token = token_of(agent(*AGENT_PERMS))
    flow = {
        "name": "broken",
        "steps": [{"id": "a", "kind": "tool", "tool": "no_such_tool", "input_mapping": {}}],
    }

    (result,) = over_http(mcp_http, token, calls(("validate_workflow", {"definition": flow})))

    report = body(result)
    assert not result.is_error
    assert report["ok"] is False
    assert {(i["code"], i["path"]) for i in report["issues"]} >= {("unknown_tool", "steps[0].tool")}
