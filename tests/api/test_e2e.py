"""End to end from a plain HTTP client (httpx, not Django's test client), on a live server:
create a workflow from a file, approve it, start a run through its webhook, poll until it
succeeded, read the outputs."""

from __future__ import annotations

import time

import httpx
import pytest
from rest_framework.authtoken.models import Token

from tests.conftest import EXAMPLES_DIR
from tests.factories import UserFactory
from triggers.webhooks import webhook_sign


@pytest.mark.django_db(transaction=True)
def test_file_to_outputs_through_the_webhook(live_server, output_dir):
    user = UserFactory(username="operator", superuser=True)
    token = Token.objects.create(user=user).key
    api = httpx.Client(
        base_url=f"{live_server.url}/api/v1",
        headers={"Authorization": f"Token {token}"},
        timeout=30,
    )
    source = (EXAMPLES_DIR / "sales_report.yaml").read_text(encoding="utf-8")

    created = api.post("/workflows/", json={"source": source, "status": "pending_review"})
    assert created.status_code == 201, created.text
    version = f"/workflows/sales_report/versions/{created.json()['version']}/"
    approval = api.post(version + "approve/", json={"sample_inputs": {"top": 3}})
    assert approval.status_code == 200, approval.text
    assert approval.json()["status"] == "passed"
    assert api.get(version).json()["status"] == "active"
    hook = api.post("/webhooks/", json={"workflow": "sales_report"}).json()

    body = b'{"top": 2, "report_path": "from_webhook.html"}'
    timestamp = int(time.time())
    delivered = httpx.post(
        live_server.url + hook["url"],
        content=body,
        headers={
            "Content-Type": "application/json",
            "X-Flowpilot-Timestamp": str(timestamp),
            "X-Flowpilot-Signature": webhook_sign(
                secret=hook["secret"], timestamp=timestamp, body=body
            ),
        },
    )
    assert delivered.status_code == 202, delivered.text
    run_url = delivered.json()["url"].removeprefix("/api/v1")
    deadline = time.monotonic() + 30
    while (run := api.get(run_url).json())["status"] not in {"succeeded", "failed"}:
        assert time.monotonic() < deadline, run
        time.sleep(0.2)

    assert run["status"] == "succeeded", run["error_summary"]
    assert run["trigger"] == "webhook"
    assert run["inputs"] == {
        "csv_path": "data/sales.csv",
        "top": 2,
        "report_path": "from_webhook.html",
    }
    assert run["outputs"]["rows_read"] == 40
    assert run["outputs"]["report"].endswith("from_webhook.html")
    assert (output_dir / "from_webhook.html").exists()
    assert len(run["steps"]) == 4
    assert {s["status"] for s in run["steps"]} == {"succeeded"}
