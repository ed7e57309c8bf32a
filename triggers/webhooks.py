"""Webhook triggers: a signed POST starts a run of a workflow's active version.

The sender signs ``"{timestamp}." + body`` with the trigger's secret (HMAC-SHA256,
hex) and sends ``X-Flowpilot-Timestamp`` (Unix seconds) and
``X-Flowpilot-Signature: sha256=<hex>``. A delivery is refused when the timestamp
is outside the replay window, when the signature does not match (or the trigger
does not exist or is disabled — the same answer, so a URL's existence is not
told), and when the same signature was accepted before (a replay; the unique
constraint on (trigger, signature) decides, also between concurrent requests).
The body, a JSON object, is the run's inputs, checked against the declared ones
(and refused when it holds what no database stores: ``tools.jsondata.storage_problem``);
the run's trigger is ``webhook``.
Rotating a trigger replaces its URL and its secret. The replaced pair keeps working
for ``FLOWPILOT_WEBHOOK_ROTATION_OVERLAP`` seconds (0: not at all): during the
overlap the old URL and the new one each take a signature made with the old secret
or the new one, so a sender switches without a gap; after it only the new pair works.
A second rotation keeps only the pair it replaced.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.models import Run, RunTrigger
from runs.services import run_create, run_enqueue
from tools.errors import FlowpilotError
from tools.jsondata import storage_problem
from triggers.models import WebhookDelivery, WebhookTrigger
from workflows.selectors import workflow_get_runnable

SIGNATURE_PREFIX = "sha256="
MAX_TIMESTAMP_DIGITS = 12  # Unix seconds until the year 33658


class WebhookError(FlowpilotError):
    code = "webhook_error"
    http_status = 400


class WebhookSignatureInvalid(WebhookError):
    code = "signature_invalid"
    http_status = 401


class WebhookTimestampInvalid(WebhookError):
    code = "timestamp_out_of_window"
    http_status = 401


class WebhookReplayed(WebhookError):
    code = "webhook_replayed"
    http_status = 409


class WebhookExists(WebhookError):
    code = "webhook_exists"
    http_status = 409


class WebhookBodyInvalid(WebhookError):
    code = "body_invalid"
    http_status = 400


def webhook_sign(*, secret: str, timestamp: int, body: bytes) -> str:
    """The signature header value for ``body`` sent at ``timestamp``."""
    message = f"{timestamp}.".encode() + body
    return SIGNATURE_PREFIX + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def webhook_create(*, workflow_name: str, user: User | None) -> WebhookTrigger:
    """A trigger for a workflow that has an active version (``WorkflowNotFound`` if not)."""
    workflow_get_runnable(name=workflow_name)
    try:
        with transaction.atomic():
            return WebhookTrigger.objects.create(
                workflow_name=workflow_name, created_by=user, **_credentials()
            )
    except IntegrityError as exc:
        raise WebhookExists(
            f"workflow `{workflow_name}` has a webhook trigger already; rotate its secret instead"
        ) from exc


def webhook_rotate(*, trigger: WebhookTrigger) -> WebhookTrigger:
    """New URL and secret; the old ones are refused once the rotation overlap ends."""
    trigger.previous_public_id = trigger.public_id
    trigger.previous_secret = trigger.secret
    for key, value in _credentials().items():
        setattr(trigger, key, value)
    trigger.rotated_at = timezone.now()
    trigger.save(
        update_fields=["public_id", "secret", "previous_public_id", "previous_secret", "rotated_at"]
    )
    return trigger


def _in_overlap(trigger: WebhookTrigger, now: datetime) -> bool:
    overlap = timedelta(seconds=settings.FLOWPILOT_WEBHOOK_ROTATION_OVERLAP)
    rotated = trigger.rotated_at
    return bool(trigger.previous_secret) and rotated is not None and now - rotated < overlap


def _trigger_for(public_id: str, now: datetime) -> WebhookTrigger | None:
    """The enabled trigger of a URL: its current one, or the one it had before the last
    rotation while the overlap lasts."""
    enabled = WebhookTrigger.objects.filter(enabled=True)
    trigger = enabled.filter(public_id=public_id).first()
    if trigger is None and public_id:
        trigger = enabled.filter(previous_public_id=public_id).first()
        if trigger is not None and not _in_overlap(trigger, now):
            return None
    return trigger


def _secrets(trigger: WebhookTrigger | None, now: datetime) -> list[str]:
    if trigger is None:
        return [""]
    return (
        [trigger.secret, trigger.previous_secret] if _in_overlap(trigger, now) else [trigger.secret]
    )


def webhook_set_enabled(*, trigger: WebhookTrigger, enabled: bool) -> WebhookTrigger:
    trigger.enabled = enabled
    trigger.save(update_fields=["enabled"])
    return trigger


def _credentials() -> dict[str, str]:
    return {"public_id": secrets.token_urlsafe(24), "secret": secrets.token_hex(32)}


def webhook_deliver(
    *,
    public_id: str,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now: datetime | None = None,
) -> Run:
    """Verify a delivery, record it, and start a run with the body as inputs."""
    now = now or timezone.now()
    sent_at = _timestamp(timestamp, now)
    trigger = _trigger_for(public_id, now)
    digest = _verified(trigger, _secrets(trigger, now), sent_at, signature, body)
    assert trigger is not None  # _verified refuses a missing trigger
    inputs = _inputs(body)
    workflow = workflow_get_runnable(name=trigger.workflow_name)
    window = timedelta(seconds=settings.FLOWPILOT_WEBHOOK_WINDOW)
    try:
        with transaction.atomic():
            delivery = WebhookDelivery.objects.create(
                trigger=trigger, signature=digest, timestamp=sent_at
            )
            run = run_create(workflow=workflow, trigger=RunTrigger.WEBHOOK, inputs=inputs)
            delivery.run = run
            delivery.save(update_fields=["run"])
    except IntegrityError as exc:
        raise WebhookReplayed("this delivery was accepted before; sign a new one") from exc
    # A signature past the window can no longer be replayed; its row is not needed.
    WebhookDelivery.objects.filter(trigger=trigger, received_at__lt=now - 2 * window).delete()
    return run_enqueue(run=run)


def _timestamp(header: str | None, now: datetime) -> int:
    window = settings.FLOWPILOT_WEBHOOK_WINDOW
    refused = WebhookTimestampInvalid(
        f"X-Flowpilot-Timestamp must be the Unix time of sending, within {window} s of ours"
    )
    text = (header or "").strip()
    # Unix seconds in ASCII digits, bounded before int(): 4,000 digits overflowed the
    # float comparison below (a 500 to anyone).
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_TIMESTAMP_DIGITS):
        raise refused
    sent_at = int(text)
    if abs(now.timestamp() - sent_at) > window:
        raise refused
    return sent_at


def _verified(
    trigger: WebhookTrigger | None,
    secrets_: list[str],
    sent_at: int,
    signature: str | None,
    body: bytes,
) -> str:
    """The hex digest of the signature that matched one of ``secrets_``; each is
    compared (in constant time), so the answer's timing does not say which matched."""
    given = (signature or "").strip().encode()
    matched = None
    for secret in secrets_:
        expected = webhook_sign(secret=secret, timestamp=sent_at, body=body)
        if hmac.compare_digest(given, expected.encode()):
            matched = expected
    if trigger is None or matched is None:
        raise WebhookSignatureInvalid(
            "the X-Flowpilot-Signature does not match this URL's secret (or the URL is unknown)"
        )
    return matched.removeprefix(SIGNATURE_PREFIX)


def _inputs(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise WebhookBodyInvalid("the body must be a JSON object of run inputs") from exc
    if not isinstance(data, dict):
        raise WebhookBodyInvalid(
            f"the body must be a JSON object of run inputs, not {type(data).__name__}"
        )
    problem = storage_problem(data, "body")
    if problem is not None:
        raise WebhookBodyInvalid(problem)
    return data
