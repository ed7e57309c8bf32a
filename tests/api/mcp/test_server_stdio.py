"""flowpilot's MCP server over stdio: ``manage.py mcpserve`` spawned by the SDK's client
against this session's test database (a shared file on SQLite, the test database on
PostgreSQL), the token in ``FLOWPILOT_MCP_TOKEN`` or ``--token``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp.shared.exceptions import MCPError

from review.services import workflow_approve
from runs.models import Run
from tests.api.mcp.conftest import AGENT_PERMS, agent, calls, over_stdio, token_of
from tests.conftest import REPO_ROOT
from tests.factories import DIGEST_GOAL, UserFactory, digest_plan
from tests.startup import start_deadline
from tests.test_import_budget import imported
from workflows.models import Workflow

# Its subject is not the database: the PostgreSQL pass leaves it to the SQLite pass.
pytestmark = pytest.mark.one_database


def test_plan_approve_run_read_over_stdio(stdio_env, planner_llm, example_tools, output_dir):
    planner_llm.reply_json(digest_plan())
    env = {**stdio_env, "FLOWPILOT_MCP_TOKEN": token_of(agent(*AGENT_PERMS))}

    listed, planned, early = over_stdio(
        env,
        calls(
            ("list_tools", {"kind": "builtin"}),
            ("plan_workflow", {"goal": DIGEST_GOAL}),
            ("run_workflow", {"workflow": "sales_digest", "version": 1}),
        ),
    )

    assert "aggregate" in [t["name"] for t in listed.structured_content["tools"]]
    plan = planned.structured_content
    assert plan["status"] == "succeeded", plan
    assert plan["workflow"]["status"] == "pending_review"
    assert early.is_error
    assert "v1 is pending_review, not active" in early.structured_content["message"]

    version = Workflow.objects.get(name="sales_digest", version=plan["workflow"]["version"])
    approval = workflow_approve(
        version=version,
        approved_by=UserFactory(username="human", approver=True),
        sample_inputs={"threshold": 1},
    )
    assert approval.status == "passed"

    ran, got = over_stdio(
        env,
        calls(
            ("run_workflow", {"workflow": "sales_digest", "inputs": {"threshold": 5}, "wait": 30}),
            ("get_run", {"run_id": 0}),
        ),
        "--transport",
        "stdio",
    )
    run = ran.structured_content
    assert run["status"] == "succeeded", run
    assert got.is_error  # run ids start at 1: a clear refusal, not a crash
    assert Run.objects.get(pk=run["id"]).trigger == "mcp"

    (read,) = over_stdio(env, calls(("get_run", {"run_id": run["id"]})))
    assert read.structured_content["outputs"] == run["outputs"]


def test_the_token_may_be_given_as_an_argument(stdio_env):
    token = token_of(agent("workflows.view_workflow"))

    listed, tools = over_stdio(
        stdio_env, calls(("list_workflows", {}), ("list_tools", {})), "--token", token
    )

    assert listed.structured_content == {"workflows": [], "truncated": False}
    assert tools.structured_content["code"] == "permission_denied"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("", "an API token is needed"),
        ("not-a-token", "Invalid token."),
    ],
)
def test_without_a_valid_token_the_server_refuses_to_start(stdio_env, token, message):
    env = {**stdio_env, "FLOWPILOT_MCP_TOKEN": token}

    with pytest.raises(BaseExceptionGroup) as caught:
        over_stdio(env, calls(("list_tools", {})))
    assert caught.group_contains(MCPError, match="Connection closed", depth=2)

    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(REPO_ROOT / "manage.py"), "mcpserve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=start_deadline(),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert f"CommandError: refused: {message}" in done.stderr
    assert done.stdout == ""  # stdout is the protocol's: nothing else is written there
    # The token is checked before the MCP SDK is loaded: a refused start costs no more
    # than any command.
    found = imported(done.stderr)
    assert "api.mcp.auth" in found
    assert "mcp" not in found
    assert "api.mcp.server" not in found
