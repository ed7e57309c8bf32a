"""Webhook deliveries (``triggers/webhooks.py``), beyond what the endpoint tests reach."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import UserFactory, WorkflowFactory
from triggers.models import WebhookDelivery
from triggers.webhooks import webhook_create, webhook_deliver, webhook_sign

pytestmark = pytest.mark.django_db


def test_deliveries_older_than_twice_the_window_are_forgotten(output_dir, settings):
    WorkflowFactory(status="active")
    trigger = webhook_create(workflow_name="sales_report", user=UserFactory())
    old = WebhookDelivery.objects.create(trigger=trigger, signature="0" * 64, timestamp=1)
    WebhookDelivery.objects.filter(pk=old.pk).update(
        received_at=timezone.now() - timedelta(seconds=3 * settings.FLOWPILOT_WEBHOOK_WINDOW)
    )
    now = int(time.time())

    run = webhook_deliver(
        public_id=trigger.public_id,
        timestamp=str(now),
        signature=webhook_sign(secret=trigger.secret, timestamp=now, body=b"{}"),
        body=b"{}",
    )

    assert list(WebhookDelivery.objects.values_list("run", flat=True)) == [run.pk]


def test_a_webhook_body_with_unstorable_text_is_refused(output_dir):
    from triggers.webhooks import WebhookBodyInvalid

    WorkflowFactory(status="active")
    trigger = webhook_create(workflow_name="sales_report", user=None)
    body = b'{"csv_path": "x\\u0000"}'
    now = int(time.time())

    with pytest.raises(WebhookBodyInvalid, match=r"`body\.csv_path` holds a NUL character"):
        webhook_deliver(
            public_id=trigger.public_id,
            timestamp=str(now),
            signature=webhook_sign(secret=trigger.secret, timestamp=now, body=body),
            body=body,
        )
