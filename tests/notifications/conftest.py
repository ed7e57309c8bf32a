"""A workflow whose tool uses a secret, with a validation run and a failed run of it."""

import pytest

from tests.fakes import FakeAPI, FakeResponse

SECRET = "sk-live-0123456789abcdef"
ORDERS_TOOL = """
- name: orders
  kind: http
  description: Orders of a region (loopback fake), with an API key in the query.
  base_url: "{base}"
  request:
    method: GET
    url: /orders/{{{{region}}}}
  auth: {{type: api_key, in: query, name: key, value: "{{{{env.ORDERS_KEY}}}}"}}
  inputs:
    type: object
    properties: {{region: {{type: string}}}}
    required: [region]
  timeout: 5
"""


def orders_flow(**notifications) -> dict:
    return {
        "name": "orders_digest",
        "inputs": {"region": {"type": "string", "default": "eu"}},
        "steps": [
            {"id": "fetch", "kind": "tool", "tool": "orders",
             "input_mapping": {"region": "$input.region"}},
            {"id": "count", "kind": "transform", "expression": "length(items)",
             "input_mapping": {"items": "fetch.items"}},
        ],
        "notifications": notifications,
    }  # fmt: skip


@pytest.fixture
def orders_api(monkeypatch):
    from tools.loader import load_tool_text
    from tools.services import tool_upsert

    monkeypatch.setenv("ORDERS_KEY", SECRET)
    fake = FakeAPI().start()
    fake.route(
        "orders",
        "GET",
        r"/orders/(?P<region>[^/]+)",
        lambda request, match: FakeResponse.json({"items": [1, 2, 3], "region": match["region"]}),
    )
    for spec in load_tool_text(ORDERS_TOOL.format(base=fake.url), source="tests"):
        tool_upsert(spec=spec, source="tests")
    yield fake
    fake.stop()


def run_now(workflow, trigger):
    from runs.services import run_create, run_execute

    return run_execute(run=run_create(workflow=workflow, trigger=trigger))
