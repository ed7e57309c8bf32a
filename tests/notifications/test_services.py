"""Failure reports over a real SMTP server and a real (loopback) webhook receiver."""

import json

import pytest
from pydantic import ValidationError

from notifications.models import Delivery, DeliveryStatus
from notifications.services import notification_run_finished
from runs.models import Run, RunStatus, RunTrigger, ToolCallRecording
from tests.notifications.conftest import SECRET, orders_flow, run_now
from tests.notifications.support import SMTPServer, WebhookReceiver
from workflows.schema import WorkflowSpec
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db
HOOK_KEY = "hook-signing-key-42"


@pytest.fixture
def smtp(settings):
    with SMTPServer() as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        yield server


def failed_run(orders_api, **notifications):
    workflow, _ = workflow_import(data=orders_flow(**notifications))
    validation = run_now(workflow, RunTrigger.VALIDATION)
    assert validation.status == RunStatus.SUCCEEDED
    orders_api.fail("orders", status=403, body={"error": "key revoked"})
    run = run_now(workflow, RunTrigger.SCHEDULE)
    assert run.status == RunStatus.FAILED
    return workflow, validation, run


def test_the_failure_email_names_the_step_its_request_and_the_diff(orders_api, smtp, settings):
    workflow, validation, run = failed_run(orders_api, email=["ops@example.com"])

    made = notification_run_finished(run_id=run.pk)

    assert [d.status for d in made] == [DeliveryStatus.SENT]
    (message,) = smtp.messages
    assert message["To"] == "ops@example.com"
    subject = f"[flowpilot] orders_digest v{workflow.version} run {run.pk} failed"
    assert message["Subject"] == subject
    text = message.get_content()
    assert "Workflow: orders_digest" in text
    assert f"Version: {workflow.version}" in text
    assert "Trigger: schedule" in text
    assert "Failing step: fetch" in text
    assert "403" in text  # the response status, from the step's error
    assert "/orders/eu?key=***" in text  # the request URL, its API key masked
    request = text.split("Request: ", 1)[1].split("\nResponse: ")[0]
    assert json.loads(request)["inputs"] == {"region": "eu"}
    diff = json.loads(text.split("Difference from the validation run: ", 1)[1])
    assert diff["validation_run"] == validation.pk
    assert diff["status"] == {"validation": "succeeded", "now": "failed"}
    assert diff["keys_missing"] == ["items", "region"]
    [call] = diff["recorded_calls"]  # what the validation run sent and got for the step
    assert call["method"] == "GET"
    assert call["url"].endswith("/orders/eu?key=***")
    assert call["status"] == 200
    assert SECRET not in message.as_string()
    assert orders_api.requests("orders")[-1].arg("key") == SECRET  # the tool did send it


def test_one_signed_webhook_per_failure_and_a_retry_after_a_500(orders_api, settings):
    settings.FLOWPILOT_WEBHOOK_SECRET = HOOK_KEY
    waits = []
    with WebhookReceiver(HOOK_KEY, fail_first=1) as receiver:
        _, _, run = failed_run(orders_api, webhook=receiver.url)

        (delivery,) = notification_run_finished(run_id=run.pk, sleep=waits.append)
        again = notification_run_finished(run_id=run.pk, sleep=waits.append)

    assert again == []  # the same failure is reported once
    assert [r["verified"] for r in receiver.received] == [True, True]
    assert receiver.received[0]["body"] == receiver.received[1]["body"]
    assert {r["delivery"] for r in receiver.received} == {str(delivery.pk)}
    body = receiver.received[1]["body"]
    assert (body["event"], body["workflow"], body["run"]) == ("failed", "orders_digest", run.pk)
    assert body["failed_steps"][0]["step"] == "fetch"
    assert SECRET not in json.dumps(body)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == (DeliveryStatus.SENT, 2)
    assert [t["status"] for t in delivery.attempt_log] == [500, 200]
    assert waits == [settings.FLOWPILOT_WEBHOOK_BACKOFF]
    assert Delivery.objects.filter(run=run).count() == 1


PUBLIC = "https://flowpilot.example.com"


def test_every_report_links_the_run_the_failing_step_and_the_workflow(
    orders_api, smtp, settings, admin_client
):
    settings.FLOWPILOT_PUBLIC_URL = PUBLIC + "/"  # a trailing slash is not doubled
    settings.FLOWPILOT_WEBHOOK_SECRET = HOOK_KEY
    with WebhookReceiver(HOOK_KEY) as receiver:
        workflow, _, run = failed_run(orders_api, email=["ops@example.com"], webhook=receiver.url)
        notification_run_finished(run_id=run.pk)

    run_url = f"{PUBLIC}/admin/runs/run/{run.pk}/change/"
    links = {
        "run": run_url,
        "workflow": f"{PUBLIC}/admin/workflows/workflow/{workflow.pk}/change/",
        "note": "",
    }
    body = receiver.received[0]["body"]
    assert body["links"] == links
    assert body["failed_steps"][0]["link"] == run_url + "#step-fetch"
    lines = smtp.messages[0].get_content().splitlines()
    assert f"Run page: {run_url}" in lines
    assert f"Workflow page: {links['workflow']}" in lines
    assert f"Step page: {run_url}#step-fetch" in lines
    page = admin_client.get(run_url.removeprefix(PUBLIC)).content.decode()
    assert 'id="step-fetch"' in page  # the step link's anchor


def test_without_a_public_url_the_report_says_so_and_invents_no_host(orders_api, smtp, settings):
    settings.FLOWPILOT_PUBLIC_URL = ""
    settings.FLOWPILOT_WEBHOOK_SECRET = HOOK_KEY
    with WebhookReceiver(HOOK_KEY) as receiver:
        _, _, run = failed_run(orders_api, email=["ops@example.com"], webhook=receiver.url)
        notification_run_finished(run_id=run.pk)

    body = receiver.received[0]["body"]
    assert (body["links"]["run"], body["links"]["workflow"]) == (None, None)
    assert body["failed_steps"][0]["link"] is None
    assert "FLOWPILOT_PUBLIC_URL is not set" in body["links"]["note"]
    (line,) = [x for x in smtp.messages[0].get_content().splitlines() if x.startswith("Links: ")]
    assert line.startswith("Links: FLOWPILOT_PUBLIC_URL is not set")
    assert "http" not in line


def test_a_webhook_that_stays_down_is_recorded_failed_after_its_tries(orders_api, settings):
    settings.FLOWPILOT_WEBHOOK_ATTEMPTS = 3
    settings.FLOWPILOT_WEBHOOK_SECRET = HOOK_KEY
    waits = []
    with WebhookReceiver(HOOK_KEY, fail_first=10) as receiver:
        _, _, run = failed_run(orders_api, webhook=receiver.url)
        (delivery,) = notification_run_finished(run_id=run.pk, sleep=waits.append)

    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 3)
    assert waits == [settings.FLOWPILOT_WEBHOOK_BACKOFF, 2 * settings.FLOWPILOT_WEBHOOK_BACKOFF]
    assert len(receiver.received) == 3


def test_recovery_is_the_first_success_after_a_failure(orders_api, smtp):
    workflow, _, _ = failed_run(orders_api, email=["ops@example.com"], on=["recovered"])
    orders_api.heal("orders")

    first = run_now(workflow, RunTrigger.SCHEDULE)
    second = run_now(workflow, RunTrigger.SCHEDULE)

    assert [d.event for d in notification_run_finished(run_id=first.pk)] == ["recovered"]
    assert notification_run_finished(run_id=second.pk) == []
    assert "recovered" in smtp.messages[0]["Subject"]


def test_a_failed_replay_sends_no_report(orders_api, smtp):
    workflow, _, _ = failed_run(orders_api, email=["ops@example.com"], on=["failed"])
    replay = run_now(workflow, RunTrigger.REPLAY)  # a replay's report is its own page
    assert replay.status == RunStatus.FAILED

    assert notification_run_finished(run_id=replay.pk) == []
    assert smtp.messages == []


def test_a_finished_run_announces_itself_through_the_hook(
    orders_api, smtp, django_capture_on_commit_callbacks
):
    workflow, _ = workflow_import(data=orders_flow(email=["ops@example.com"]))
    orders_api.fail("orders", status=500)

    with django_capture_on_commit_callbacks(execute=True):
        run = run_now(workflow, RunTrigger.CLI)

    assert run.status == RunStatus.FAILED
    assert Delivery.objects.get(run=run).status == DeliveryStatus.SENT
    assert "Failing step: fetch" in smtp.messages[0].get_content()


@pytest.mark.parametrize(
    ("notifications", "where"),
    [
        ({"email": ["not-an-address"]}, "notifications.email"),
        ({"webhook": "ftp://example.com/x"}, "notifications.webhook"),
        ({"on": ["exploded"]}, "notifications.on.0"),
        ({"webhook_secret_env": "lower-case"}, "notifications.webhook_secret_env"),
    ],
)
def test_notification_settings_are_validated(notifications, where):
    with pytest.raises(ValidationError) as caught:
        WorkflowSpec.model_validate(orders_flow(**notifications))
    locations = [".".join(str(p) for p in e["loc"]) for e in caught.value.errors()]
    assert any(loc.startswith(where) for loc in locations), locations


def test_an_unreachable_smtp_server_is_a_failed_delivery(orders_api, settings):
    from tests.notifications.support import free_port

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    _, _, run = failed_run(orders_api, email=["ops@example.com"])

    (delivery,) = notification_run_finished(run_id=run.pk)

    assert (delivery.status, delivery.attempts) == (DeliveryStatus.FAILED, 1)
    assert "ConnectionRefusedError" in delivery.attempt_log[0]["error"]


def test_a_webhook_key_can_come_from_the_workflows_own_variable(orders_api, monkeypatch):
    monkeypatch.setenv("ORDERS_HOOK_KEY", "per-flow-key-1")
    with WebhookReceiver("per-flow-key-1") as receiver:
        _, _, run = failed_run(
            orders_api, webhook=receiver.url, webhook_secret_env="ORDERS_HOOK_KEY"
        )
        (delivery,) = notification_run_finished(run_id=run.pk)
    assert delivery.status == DeliveryStatus.SENT
    assert [r["verified"] for r in receiver.received] == [True]


def test_without_a_key_no_unsigned_webhook_is_sent(orders_api, settings):
    settings.FLOWPILOT_WEBHOOK_SECRET = ""
    with WebhookReceiver("") as receiver:
        _, _, run = failed_run(orders_api, webhook=receiver.url)
        (delivery,) = notification_run_finished(run_id=run.pk)
    assert delivery.status == DeliveryStatus.FAILED
    assert "no HMAC key" in delivery.attempt_log[0]["error"]
    assert receiver.received == []


# --- the replay difference ---------------------------------------------------------------


def edit_recorded_items(validation, items) -> None:
    """Change what the validation run recorded the orders API answering."""
    [recorded] = ToolCallRecording.objects.filter(step_result__run=validation)
    body = json.loads(recorded.response_body)
    body["items"] = items
    ToolCallRecording.objects.filter(pk=recorded.pk).update(response_body=json.dumps(body))


def test_the_failure_report_includes_what_a_replay_of_the_version_finds(
    orders_api, smtp, settings, django_capture_on_commit_callbacks
):
    settings.FLOWPILOT_WEBHOOK_SECRET = HOOK_KEY
    with WebhookReceiver(HOOK_KEY) as receiver:
        _, validation, run = failed_run(orders_api, email=["ops@example.com"], webhook=receiver.url)
        edit_recorded_items(validation, [1, 2])
        sent = len(orders_api.requests("orders"))

        with django_capture_on_commit_callbacks() as announced:
            made = notification_run_finished(run_id=run.pk)
        again = notification_run_finished(run_id=run.pk)

    assert [d.status for d in made] == [DeliveryStatus.SENT, DeliveryStatus.SENT]
    assert again == []
    replay = Run.objects.get(trigger=RunTrigger.REPLAY)  # one replay, not one per channel
    assert replay.replay_of == validation
    assert announced == []  # the replay run told no hook it finished: no report of its own
    assert len(orders_api.requests("orders")) == sent  # the replay sent nothing
    summary = (
        f"replay run {replay.pk} of orders_digest v1 against validation run {validation.pk}: "
        "2 of 2 steps differ (fetch, count)"
    )
    text = smtp.messages[0].get_content().replace("\r\n", "\n")
    assert f"Replay against the validation run: {summary}\n" in text
    assert "  differs  fetch\n             output.items: 3 items → 2\n" in text
    assert "  differs  count\n             output: 3 → 2\n" in text
    assert text.index("Replay against") < text.index("Failing step: fetch")
    body = receiver.received[0]["body"]
    assert body["replay"] == {
        "summary": summary,
        "matched": False,
        "replay_run": replay.pk,
        "validation_run": validation.pk,
        "differences": [
            {"step": "fetch", "lines": ["output.items: 3 items → 2"]},
            {"step": "count", "lines": ["output: 3 → 2"]},
        ],
    }
    assert SECRET not in json.dumps(body)


def test_a_replay_that_matches_says_the_version_still_does_what_it_did(orders_api, smtp):
    _, validation, run = failed_run(orders_api, email=["ops@example.com"])

    notification_run_finished(run_id=run.pk)

    replay = Run.objects.get(trigger=RunTrigger.REPLAY)
    assert (
        "Replay against the validation run: replay run "
        f"{replay.pk} of orders_digest v1 against validation run {validation.pk}: "
        "all 2 steps match\n"
    ) in smtp.messages[0].get_content().replace("\r\n", "\n")


def test_a_replay_that_cannot_run_is_one_line_of_the_report(orders_api, smtp):
    workflow, _ = workflow_import(data=orders_flow(email=["ops@example.com"]))
    orders_api.fail("orders", status=403, body={"error": "key revoked"})
    run = run_now(workflow, RunTrigger.SCHEDULE)  # no validation run to replay against

    (delivery,) = notification_run_finished(run_id=run.pk)

    assert delivery.status == DeliveryStatus.SENT
    assert delivery.payload["replay"] == {
        "summary": f"not replayed: `orders_digest v{workflow.version}` has no succeeded "
        "validation run to replay against; approve it (its validation run records every "
        "tool call)"
    }
    assert "Replay against the validation run: not replayed: " in smtp.messages[0].get_content()


def test_the_replay_difference_can_be_turned_off(orders_api, smtp, settings):
    settings.FLOWPILOT_REPORT_REPLAY = False
    _, _, run = failed_run(orders_api, email=["ops@example.com"])

    (delivery,) = notification_run_finished(run_id=run.pk)

    assert delivery.payload["replay"] is None
    assert not Run.objects.filter(trigger=RunTrigger.REPLAY).exists()
    assert "Replay against" not in smtp.messages[0].get_content()
