"""What the poll-trigger tests share: a loopback orders API whose pages overlap, its
http tool, and a workflow that polls it."""

from __future__ import annotations

import threading

from tests.fakes import FakeAPI, FakeResponse
from tools.loader import load_tool_text
from tools.services import tool_upsert
from workflows.services import workflow_activate_trusted, workflow_import

TOKEN = "orders-token-8c41f0d2"


class Orders:
    """An orders API: ``GET /orders?since=N`` answers ``{"data": [...]}``, the orders
    whose id is at least ``N`` (the order at the cursor again: pages overlap), at most
    ``page`` of them, by id. ``add`` makes new orders."""

    def __init__(self, fake: FakeAPI, *, page: int = 3) -> None:
        self.fake, self.page = fake, page
        self._lock = threading.Lock()
        self.orders: list[dict] = []
        fake.route("orders", "GET", r"/orders.*", self._answer)

    def add(self, count: int) -> None:
        with self._lock:
            start = len(self.orders) + 1
            self.orders += [
                {"id": n, "total": n * 10.5, "customer": f"c{n}"}
                for n in range(start, start + count)
            ]

    def _answer(self, request, match) -> FakeResponse:
        since = int(request.arg("since") or 0)
        with self._lock:
            page = [order for order in self.orders if order["id"] >= since][: self.page]
        return FakeResponse.json({"data": page, "count": len(page)})


ORDERS_TOOL = """
name: list_orders
kind: http
base_url: "{base}"
request:
  method: GET
  url: /orders
  query: {{since: "{{{{since}}}}"}}
{auth}inputs:
  type: object
  properties:
    since: {{type: [integer, string, "null"]}}
timeout: 10
"""


AUTH = 'auth: {type: bearer, token: "{{env.ORDERS_TOKEN}}"}\n'


def load_orders_tool(url: str, *, auth: bool = True) -> None:
    """Store the ``list_orders`` tool (with ``auth``: a bearer token read from
    ``ORDERS_TOKEN``, which a worker process started elsewhere does not have)."""
    text = ORDERS_TOOL.format(base=url, auth=AUTH if auth else "")
    for spec in load_tool_text(text, source="tests/triggers"):
        tool_upsert(spec=spec, source="tests/triggers")


def poll_flow(*, every: int = 60, name: str = "order_intake", **poll) -> dict:
    return {
        "name": name,
        "inputs": {"order_id": {"type": "integer"}, "total": {"type": "number", "default": 0}},
        "steps": [
            {
                "id": "echo",
                "kind": "transform",
                "expression": "order_id",
                "input_mapping": {"order_id": "$input.order_id"},
            }
        ],
        "triggers": [
            {
                "poll": {
                    "tool": "list_orders",
                    "every": every,
                    "args": {"since": "$cursor"},
                    "items": "data",
                    "dedup_key": "id",
                    "cursor": {"initial": 0, "next": "$max.id"},
                    **poll,
                },
                "inputs": {"order_id": "$item.id", "total": "$item.total"},
            }
        ],
    }


def activate(data: dict):
    workflow, _ = workflow_import(data=data)
    return workflow_activate_trusted(workflow=workflow)
