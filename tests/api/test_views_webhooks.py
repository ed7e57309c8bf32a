"""Webhook triggers: manage, deliver signed requests; refuse bad, stale and replayed ones."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from runs.models import Run
from tests.api.conftest import assert_error
from tests.factories import WorkflowFactory
from triggers.models import WebhookDelivery, WebhookTrigger
from triggers.webhooks import webhook_sign

pytestmark = pytest.mark.django_db

MANAGE = (
    "triggers.view_webhooktrigger",
    "triggers.add_webhooktrigger",
    "triggers.change_webhooktrigger",
    "triggers.delete_webhooktrigger",
)


@pytest.fixture
def trigger(make_client, output_dir):
    WorkflowFactory(status="active")
    client = make_client(*MANAGE)
    response = client.post("/api/v1/webhooks/", {"workflow": "sales_report"}, format="json")
    assert response.status_code == 201, response.json()
    return client, response.json()


def deliver(url: str, secret: str, payload, *, timestamp: int | None = None, signature=None):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    timestamp = int(time.time()) if timestamp is None else timestamp
    signature = signature or webhook_sign(secret=secret, timestamp=timestamp, body=body)
    return APIClient().post(
        url,
        body,
        content_type="application/json",
        HTTP_X_FLOWPILOT_TIMESTAMP=str(timestamp),
        HTTP_X_FLOWPILOT_SIGNATURE=signature,
    )


def test_a_signed_delivery_starts_a_run_with_the_body_as_inputs(trigger):
    _, hook = trigger

    response = deliver(hook["url"], hook["secret"], {"top": 2})

    assert response.status_code == 202, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.trigger, run.status, run.inputs["top"]) == ("webhook", "succeeded", 2)
    assert WebhookDelivery.objects.get().run == run


def test_a_replayed_delivery_is_refused(trigger):
    _, hook = trigger
    timestamp = int(time.time())
    deliver(hook["url"], hook["secret"], {"top": 2}, timestamp=timestamp)

    again = deliver(hook["url"], hook["secret"], {"top": 2}, timestamp=timestamp)

    assert_error(again, 409, "webhook_replayed")
    assert Run.objects.count() == 1


def test_bad_signatures_unknown_urls_and_stale_timestamps_are_refused(trigger):
    _, hook = trigger
    now = int(time.time())
    wrong = deliver(hook["url"], "not-the-secret", {"top": 2})
    unknown = deliver("/api/v1/hooks/nope/", hook["secret"], {"top": 2})
    tampered = deliver(
        hook["url"],
        hook["secret"],
        b'{"top": 3}',
        signature=webhook_sign(secret=hook["secret"], timestamp=now, body=b'{"top": 2}'),
        timestamp=now,
    )
    stale = deliver(hook["url"], hook["secret"], {"top": 2}, timestamp=now - 3600)
    future = deliver(hook["url"], hook["secret"], {"top": 2}, timestamp=now + 3600)
    unsigned = APIClient().post(hook["url"], {"top": 2}, format="json")

    for response in (wrong, unknown, tampered):
        assert_error(response, 401, "signature_invalid")
    assert unknown.json() == wrong.json()  # an unknown URL is told nothing more
    for response in (stale, future, unsigned):
        assert_error(response, 401, "timestamp_out_of_window")
    assert not Run.objects.exists()


def test_the_body_is_checked_against_the_declared_inputs(trigger):
    _, hook = trigger

    body = assert_error(deliver(hook["url"], hook["secret"], {"top": "ten"}), 400, "inputs_invalid")
    assert body["details"][0]["path"] == "inputs.top"
    assert_error(deliver(hook["url"], hook["secret"], [1, 2]), 400, "body_invalid")
    assert_error(deliver(hook["url"], hook["secret"], b"{not json"), 400, "body_invalid")
    assert deliver(hook["url"], hook["secret"], b"").status_code == 202  # defaults
    assert not WebhookDelivery.objects.filter(run__isnull=True).exists()


def test_rotating_without_an_overlap_invalidates_the_old_url_and_secret(trigger, settings):
    settings.FLOWPILOT_WEBHOOK_ROTATION_OVERLAP = 0
    client, hook = trigger

    rotated = client.post(f"/api/v1/webhooks/{hook['id']}/rotate/").json()

    assert rotated["url"] != hook["url"]
    assert rotated["secret"] != hook["secret"]
    assert_error(deliver(hook["url"], hook["secret"], {}), 401, "signature_invalid")
    assert_error(deliver(rotated["url"], hook["secret"], {}), 401, "signature_invalid")
    assert deliver(rotated["url"], rotated["secret"], {}).status_code == 202
    shown = client.get(f"/api/v1/webhooks/{hook['id']}/").json()
    assert "secret" not in shown
    assert shown["rotated_at"]


def test_disable_delete_and_one_trigger_per_workflow(trigger, make_client):
    client, hook = trigger
    assert_error(
        client.post("/api/v1/webhooks/", {"workflow": "sales_report"}), 409, "webhook_exists"
    )
    assert_error(client.post("/api/v1/webhooks/", {"workflow": "nope"}), 404, "workflow_not_found")

    assert (
        client.patch(f"/api/v1/webhooks/{hook['id']}/", {"enabled": False}, format="json").json()[
            "enabled"
        ]
        is False
    )
    assert_error(deliver(hook["url"], hook["secret"], {}), 401, "signature_invalid")
    assert [h["workflow_name"] for h in client.get("/api/v1/webhooks/").json()["results"]] == [
        "sales_report"
    ]
    assert_error(
        make_client("triggers.view_webhooktrigger").delete(f"/api/v1/webhooks/{hook['id']}/"),
        403,
        "permission_denied",
    )
    assert client.delete(f"/api/v1/webhooks/{hook['id']}/").status_code == 204
    assert not WebhookTrigger.objects.exists()


def test_deliveries_are_rate_limited(trigger, monkeypatch):
    _, hook = trigger
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "webhook", "2/minute")

    answers = [deliver(hook["url"], hook["secret"], {"top": n}).status_code for n in (1, 2)]

    assert answers == [202, 202]
    refused = deliver(hook["url"], hook["secret"], {"top": 3})
    body = assert_error(refused, 429, "throttled")
    assert int(refused.headers["Retry-After"]) > 0
    assert body["message"]


def test_no_cors_headers_are_sent(trigger):
    client, _ = trigger

    response = client.get("/api/v1/webhooks/", HTTP_ORIGIN="https://elsewhere.example")

    assert response.status_code == 200
    assert not [h for h in response.headers if h.lower().startswith("access-control-")]


def test_deliveries_have_their_own_limit_not_the_anonymous_one(trigger, monkeypatch):
    _, hook = trigger
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "anon", "2/minute")
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "webhook", "5/minute")

    answers = [deliver(hook["url"], hook["secret"], {"top": n}).status_code for n in range(5)]

    assert answers == [202] * 5
    assert deliver(hook["url"], hook["secret"], {"top": 9}).status_code == 429
    # The deliveries used none of the anonymous allowance of the address.
    assert [APIClient().get("/api/v1/runs/").status_code for _ in range(3)] == [401, 401, 429]


@pytest.mark.parametrize("value", ["false", 0, "no", None, [], {}])
def test_enabled_must_be_a_json_boolean(trigger, value):
    client, hook = trigger

    response = client.patch(f"/api/v1/webhooks/{hook['id']}/", {"enabled": value}, format="json")

    body = assert_error(response, 400, "invalid")
    assert body["details"][0]["path"] == "enabled"
    assert WebhookTrigger.objects.get().enabled is True


@pytest.mark.parametrize(
    "timestamp", ["9" * 4000, "-" + "9" * 4000, "1e10", "nan", "٣٣٣", " ", "+1"]
)
def test_a_timestamp_header_of_any_form_is_a_401_never_a_500(trigger, timestamp):
    _, hook = trigger

    response = APIClient().post(
        hook["url"],
        b"{}",
        content_type="application/json",
        HTTP_X_FLOWPILOT_TIMESTAMP=timestamp,
        HTTP_X_FLOWPILOT_SIGNATURE="sha256=" + "0" * 64,
    )

    body = assert_error(response, 401, "timestamp_out_of_window")
    assert "Unix time" in body["message"]


def test_the_old_url_and_secret_work_until_the_rotation_overlap_ends(trigger, settings):
    settings.FLOWPILOT_WEBHOOK_ROTATION_OVERLAP = 120
    client, hook = trigger

    rotated = client.post(f"/api/v1/webhooks/{hook['id']}/rotate/").json()

    assert deliver(hook["url"], hook["secret"], {"top": 1}).status_code == 202
    assert deliver(rotated["url"], hook["secret"], {"top": 2}).status_code == 202
    assert deliver(rotated["url"], rotated["secret"], {"top": 3}).status_code == 202
    assert_error(deliver(hook["url"], "not-the-secret", {}), 401, "signature_invalid")
    # Once the overlap has passed, only the new pair works.
    WebhookTrigger.objects.update(rotated_at=timezone.now() - timedelta(seconds=121))
    assert_error(deliver(hook["url"], hook["secret"], {}), 401, "signature_invalid")
    assert_error(deliver(rotated["url"], hook["secret"], {}), 401, "signature_invalid")
    assert deliver(rotated["url"], rotated["secret"], {"top": 4}).status_code == 202
    # A second rotation keeps only the secret it replaced.
    client.post(f"/api/v1/webhooks/{hook['id']}/rotate/")
    assert_error(deliver(hook["url"], hook["secret"], {}), 401, "signature_invalid")
    assert deliver(rotated["url"], rotated["secret"], {"top": 5}).status_code == 202


def test_a_patch_without_enabled_changes_nothing(trigger):
    client, hook = trigger
    WebhookTrigger.objects.update(enabled=False)

    response = client.patch(f"/api/v1/webhooks/{hook['id']}/", {}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["enabled"] is False
    assert WebhookTrigger.objects.get().enabled is False
