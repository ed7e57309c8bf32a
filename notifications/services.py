"""Notification services: decide which reports a finished run deserves, send them, record them;
tell an approval step's ``notify`` recipients that it waits.

``notification_run_finished`` is the body of the task the run-finished hook queues,
``notification_approval_requested`` the body of the task an approval step's request
queues.
Per workflow, the settings are the ``notifications`` block of the version that ran
(validated with the file). "Recovered" is the first success after a failure: the
newest earlier finished run of the same workflow name (validation runs aside) failed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from notifications.channels import email_send, webhook_post
from notifications.models import Channel, Delivery, DeliveryStatus, Event
from notifications.report import PUBLIC_URL_UNSET, report_build
from runs.approval_links import approval_deciders, approval_link_make, approval_link_url
from runs.engine.caches import spec_for
from runs.models import ApprovalRequest, ApprovalStatus, Run, RunStatus, RunTrigger
from workflows.schema import ApprovalStep, Notifications
from workflows.schema_triggers import Channels

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


def _webhook_key(config: Channels) -> str:
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


def notification_approval_requested(
    *, request_id: int, sleep: Sleep = time.sleep
) -> list[Delivery]:
    """Tell an approval step's ``notify`` recipients that it waits, once per channel.

    Each email recipient gets a message of their own: one who may decide the request
    (an approver of the step, by the address of their account) gets a signed,
    single-use link that decides as them; anyone else the approval page's address. The
    webhook gets a signed JSON POST with a link per approver (``links``: user and URL),
    for the receiving system to hand each to its person: each decides as its approver,
    so the receiver must treat them as secrets. No link without ``FLOWPILOT_PUBLIC_URL``.
    The links are never stored: the delivery keeps the notice without them."""
    request = ApprovalRequest.objects.select_related("run__workflow").get(pk=request_id)
    if request.status != ApprovalStatus.PENDING:
        return []
    _, spec = spec_for(request.run.workflow)
    step = spec.step(request.step_id)
    if not isinstance(step, ApprovalStep) or not step.notify.has_channels():
        return []
    notify, notice = step.notify, approval_notice(request)
    # A link is only worth sending with the site's address (a path in an inbox is none).
    deciders = approval_deciders(request) if settings.FLOWPILOT_PUBLIC_URL else []
    made = []
    if notify.email:
        target = ", ".join(notify.email)
        if delivery := _claim_notice(request, Channel.EMAIL, target, notice):
            made.append(_send_notice_emails(delivery, request, notify.email, deciders, notice))
    if notify.webhook and (
        delivery := _claim_notice(request, Channel.WEBHOOK, notify.webhook, notice)
    ):
        links = [
            {
                "user": user.get_username(),
                "url": approval_link_url(approval_link_make(request, user)),
            }
            for user in deciders
        ]
        made.append(
            _send_webhook(delivery, {**notice, "links": links}, _webhook_key(notify), sleep)
        )
    return made


def approval_notice(request: ApprovalRequest) -> dict[str, Any]:
    """What a notice says of a waiting request (no link: those are per person)."""
    public = str(settings.FLOWPILOT_PUBLIC_URL or "").rstrip("/")
    page = reverse("admin:runs_approvalrequest_change", args=[request.pk])
    return {
        "event": Event.APPROVAL,
        "approval_request": request.pk,
        "workflow": request.run.workflow.name,
        "version": request.run.workflow.version,
        "run": request.run_id,
        "step": request.step_id,
        "approvers": list(request.approvers),
        "required": request.required,
        "expires_at": request.expires_at.isoformat() if request.expires_at else None,
        "page": public + page if public else None,
        "note": "" if public else PUBLIC_URL_UNSET,
        "preview": list(request.preview or []),  # masked when it was made
    }


def _claim_notice(
    request: ApprovalRequest, channel: str, target: str, notice: dict[str, Any]
) -> Delivery | None:
    """The notice's delivery row, or None when it was claimed already (sent once only)."""
    try:
        with transaction.atomic():
            return Delivery.objects.create(
                run_id=request.run_id, approval_request=request, channel=channel,
                event=Event.APPROVAL, target=target, payload=notice,
            )  # fmt: skip
    except IntegrityError:
        logger.info("approval request %s: %s notice already sent", request.pk, channel)
        return None


def _send_notice_emails(
    delivery: Delivery,
    request: ApprovalRequest,
    recipients: list[str],
    deciders: list[Any],
    notice: dict[str, Any],
) -> Delivery:
    """One message per recipient, each with their own link (or the page's address)."""
    by_address = {(user.email or "").lower(): user for user in deciders if user.email}
    started = timezone.now()
    try:
        for address in recipients:
            user = by_address.get(address.lower())
            link = approval_link_url(approval_link_make(request, user)) if user else None
            subject, body = approval_email_text(notice, link=link, user=user)
            EmailMessage(subject=subject, body=body, to=[address]).send(fail_silently=False)
    except Exception as exc:  # noqa: BLE001 - any backend error is recorded, not raised
        _settle(delivery, [_try(started, error=f"{type(exc).__name__}: {exc}")], ok=False)
    else:
        _settle(delivery, [_try(started)], ok=True)
    return delivery


def approval_email_text(
    notice: dict[str, Any], *, link: str | None, user: Any = None
) -> tuple[str, str]:
    """Subject and plain-text body of one recipient's notice."""
    subject = (
        f"[flowpilot] approval needed: {notice['workflow']} v{notice['version']} run "
        f"{notice['run']}, step {notice['step']}"
    )
    who = ", ".join(notice["approvers"]) or "anyone who may approve runs"
    lines = [
        f"Workflow: {notice['workflow']} v{notice['version']}",
        f"Run: {notice['run']}",
        f"Step: {notice['step']} waits for {notice['required']} approval(s) of {who}",
        f"Until: {notice['expires_at'] or 'no limit'}",
    ]
    if link is not None and user is not None:
        lines.append(
            f"Decide as {user.get_username()}: {link} (it decides as you, once: do not pass it on)"
        )
    elif notice["page"]:
        lines.append(f"Approval page: {notice['page']}")
    if notice["note"]:
        lines.append(f"Links: {notice['note']}")
    lines += ["", "What the next steps will send (secrets masked):"]
    for entry in notice["preview"] or [{"step": "—", "error": "nothing that changes anything"}]:
        if entry.get("error"):
            lines.append(f"  {entry['step']}: not shown: {entry['error']}")
            continue
        lines.append(f"  {entry['step']}: {entry['method']} {entry['url']}")
        if entry.get("body") is not None:
            body = (
                entry["body"]
                if isinstance(entry["body"], str)
                else json.dumps(entry["body"], indent=2, sort_keys=True, ensure_ascii=False)
            )
            lines += [f"    {line}" for line in body.splitlines()]
    return subject, "\n".join(lines) + "\n"
