"""Notification services: decide which reports a finished run deserves, send them, record them.

``notification_run_finished`` is the body of the task the run-finished hook queues.
Per workflow, the settings are the ``notifications`` block of the version that ran
(validated with the file). "Recovered" is the first success after a failure: the
newest earlier finished run of the same workflow name (validation runs aside) failed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from notifications.channels import email_send, webhook_post
from notifications.models import Channel, Delivery, DeliveryStatus, Event
from notifications.report import report_build
from runs.engine.caches import spec_for
from runs.models import Run, RunStatus, RunTrigger
from workflows.schema import Notifications

logger = logging.getLogger("flowpilot.notifications")

Sleep = Callable[[float], None]

# Runs that get no report: the review page and the replay report show their results.
QUIET_TRIGGERS = frozenset({RunTrigger.VALIDATION, RunTrigger.REPLAY})


def run_events(*, run: Run, wanted: list[str]) -> list[str]:
    """Which of the workflow's ``on`` events this finished run is."""
    if run.trigger in QUIET_TRIGGERS:
        return []
    if run.status == RunStatus.FAILED:
        return [Event.FAILED] if Event.FAILED in wanted else []
    if run.status != RunStatus.SUCCEEDED:
        return []
    events: list[str] = [Event.SUCCEEDED] if Event.SUCCEEDED in wanted else []
    if Event.RECOVERED in wanted and _previous_failed(run):
        events.append(Event.RECOVERED)
    return events


def _previous_failed(run: Run) -> bool:
    before = (
        Run.objects.filter(
            workflow__name=run.workflow.name,
            status__in=[RunStatus.SUCCEEDED, RunStatus.FAILED],
            finished_at__lt=run.finished_at,
        )
        .exclude(trigger__in=[RunTrigger.VALIDATION, RunTrigger.REPLAY])
        .order_by("-finished_at", "-id")
        .values_list("status", flat=True)
        .first()
    )
    return before == RunStatus.FAILED


def notification_run_finished(*, run_id: int, sleep: Sleep = time.sleep) -> list[Delivery]:
    """Send every report ``run`` deserves, once each; returns the deliveries made now."""
    run = Run.objects.select_related("workflow").get(pk=run_id)
    _, spec = spec_for(run.workflow)  # parsed once per definition in this process
    config: Notifications = spec.notifications
    made = []
    for event in run_events(run=run, wanted=list(config.on)):
        channels = [c for c in _channels(config) if not _delivered(run, c, event)]
        if not channels:
            continue  # every report of this event went out already: build (replay) nothing
        report = report_build(run=run, event=event)
        for channel in channels:
            if channel == Channel.EMAIL:
                target = ", ".join(config.email)
                if delivery := _claim(run, Channel.EMAIL, event, target, report):
                    made.append(_send_email(delivery, config.email, report))
            elif delivery := _claim(run, Channel.WEBHOOK, event, config.webhook or "", report):
                made.append(_send_webhook(delivery, report, _webhook_key(config), sleep))
    return made


def _channels(config: Notifications) -> list[str]:
    wanted = ((Channel.EMAIL, config.email), (Channel.WEBHOOK, config.webhook))
    return [channel for channel, target in wanted if target]


def _delivered(run: Run, channel: str, event: str) -> bool:
    return Delivery.objects.filter(run=run, channel=channel, event=event).exists()


def _claim(run: Run, channel: str, event: str, target: str, report: dict) -> Delivery | None:
    """The delivery row, or None when this report was already claimed (sent once only)."""
    try:
        with transaction.atomic():
            return Delivery.objects.create(
                run=run, channel=channel, event=event, target=target, payload=report
            )
    except IntegrityError:
        logger.info("run %s: %s %s report already delivered", run.pk, channel, event)
        return None


def _webhook_key(config: Notifications) -> str:
    if config.webhook_secret_env:
        return os.environ.get(config.webhook_secret_env, "")
    return settings.FLOWPILOT_WEBHOOK_SECRET


def _send_email(delivery: Delivery, recipients: list[str], report: dict) -> Delivery:
    started = timezone.now()
    try:
        email_send(recipients=recipients, report=report)
    except Exception as exc:  # noqa: BLE001 - any backend error is recorded, not raised
        _settle(delivery, [_try(started, error=f"{type(exc).__name__}: {exc}")], ok=False)
    else:
        _settle(delivery, [_try(started)], ok=True)
    return delivery


def _send_webhook(delivery: Delivery, report: dict, key: str, sleep: Sleep) -> Delivery:
    """POST until a 2xx/4xx answer or the tries run out; 5xx and network errors retry.

    Without a key nothing is sent: an unsigned report could not be told from a forged one.
    """
    tries: list[dict[str, Any]] = []
    if not key:
        missing = "no HMAC key: set FLOWPILOT_WEBHOOK_SECRET or the workflow's webhook_secret_env"
        _settle(delivery, [_try(timezone.now(), error=missing)], ok=False)
        return delivery
    delay = settings.FLOWPILOT_WEBHOOK_BACKOFF
    for attempt in range(1, settings.FLOWPILOT_WEBHOOK_ATTEMPTS + 1):
        started = timezone.now()
        try:
            response = webhook_post(
                url=delivery.target,
                report=report,
                key=key,
                delivery_id=delivery.pk,
                timestamp=int(time.time()),
                timeout=settings.FLOWPILOT_WEBHOOK_TIMEOUT,
            )
        except httpx.HTTPError as exc:
            tries.append(_try(started, error=f"{type(exc).__name__}: {exc}"))
        else:
            tries.append(_try(started, status=response.status_code))
            if response.status_code < 500:
                _settle(delivery, tries, ok=response.is_success)
                return delivery
        if attempt < settings.FLOWPILOT_WEBHOOK_ATTEMPTS:
            sleep(delay)
            delay *= 2
    _settle(delivery, tries, ok=False)
    return delivery


def _try(started: datetime, *, status: int | None = None, error: str = "") -> dict[str, Any]:
    return {"at": started.isoformat(), "status": status, "error": error[:500]}


def _settle(delivery: Delivery, tries: list[dict[str, Any]], *, ok: bool) -> None:
    delivery.attempts = len(tries)
    delivery.attempt_log = tries
    delivery.status = DeliveryStatus.SENT if ok else DeliveryStatus.FAILED
    delivery.delivered_at = timezone.now() if ok else None
    delivery.save(update_fields=["attempts", "attempt_log", "status", "delivered_at"])
