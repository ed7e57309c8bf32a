"""What the approval-step tests share: a refunds API on loopback (its POST is what the
approval previews), its tool, and a workflow that waits for approval before it."""

from __future__ import annotations

from tests.fakes import FakeAPI, FakeResponse
from tools.loader import load_tool_text
from tools.services import tool_upsert
from workflows.services import workflow_activate_trusted, workflow_import

TOKEN = "refund-token-5b7e2c91"

REFUND_TOOL = """
name: send_refund
kind: http
base_url: "{base}"
request:
  method: POST
  url: /refunds
  headers: {{Content-Type: application/json}}
  body: "{{{{refund}}}}"
{auth}inputs:
  type: object
  properties:
    refund: {{type: object}}
  required: [refund]
timeout: 10
"""


AUTH = 'auth: {type: bearer, token: "{{env.REFUNDS_TOKEN}}"}\n'


def refunds_api(*, auth: bool = True) -> FakeAPI:
    """The refunds API and its ``send_refund`` tool (with ``auth``: a bearer token read
    from ``REFUNDS_TOKEN``, which a worker process started elsewhere does not have)."""
    fake = FakeAPI().start()
    fake.route(
        "refunds", "POST", r"/refunds", lambda request, match: FakeResponse.json({"ok": True})
    )
    text = REFUND_TOOL.format(base=fake.url, auth=AUTH if auth else "")
    for spec in load_tool_text(text, source="tests/runs"):
        tool_upsert(spec=spec, source="tests/runs")
    return fake


FORM = {
    "type": "object",
    "properties": {
        "note": {"type": "string", "default": "as planned"},
        "priority": {"enum": ["low", "high"], "default": "low"},
    },
    "required": ["note"],
}


def refund_flow(name: str = "refunds", **approval) -> dict:
    """count → confirm (approval) → refund (a POST of the amount and the note)."""
    return {
        "name": name,
        "inputs": {"amount": {"type": "integer", "default": 15}},
        "steps": [
            {
                "id": "count",
                "kind": "transform",
                "expression": "{amount: sum([amount, amount]), customers: `40`}",
                "input_mapping": {"amount": "$input.amount"},
            },
            {
                "id": "confirm",
                "kind": "approval",
                "input_mapping": {"amount": "count.amount", "customers": "count.customers"},
                "approvers": ["alice", "bob", "group:finance"],
                "form": FORM,
                **approval,
            },
            {
                "id": "refund",
                "kind": "tool",
                "tool": "send_refund",
                "input_mapping": {
                    "refund": {"amount": "count.amount", "note": "confirm.note"},
                },
            },
        ],
        "edges": [{"from": "count", "to": "confirm"}, {"from": "confirm", "to": "refund"}],
    }


def activate(data: dict):
    workflow, _ = workflow_import(data=data)
    return workflow_activate_trusted(workflow=workflow)
