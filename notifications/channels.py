"""The two channels: email through Django's email backend, and a signed JSON webhook.

Webhook signature: ``X-Flowpilot-Signature: sha256=<hex>``, the HMAC-SHA256 of
``"<timestamp>.<body>"`` with the key, where ``<timestamp>`` is the Unix time in
``X-Flowpilot-Timestamp``; a receiver recomputes it and refuses stale timestamps.
``X-Flowpilot-Delivery`` is the delivery's id, the same on every retry.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx
from django.core.mail import EmailMessage

SIGNATURE_HEADER = "X-Flowpilot-Signature"
TIMESTAMP_HEADER = "X-Flowpilot-Timestamp"
DELIVERY_HEADER = "X-Flowpilot-Delivery"


def webhook_signature(*, key: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(key.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={digest.hexdigest()}"


def webhook_post(
    *, url: str, report: dict[str, Any], key: str, delivery_id: int, timestamp: int, timeout: float
) -> httpx.Response:
    """One POST of the report; raises ``httpx.HTTPError`` on a network failure."""
    body = json.dumps(report, sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: webhook_signature(key=key, timestamp=timestamp, body=body),
        DELIVERY_HEADER: str(delivery_id),
    }
    return httpx.post(url, content=body, headers=headers, timeout=timeout)


def email_text(report: dict[str, Any]) -> tuple[str, str]:
    """Subject and plain-text body of the report."""
    title = {"failed": "failed", "recovered": "recovered", "succeeded": "succeeded"}
    subject = (
        f"[flowpilot] {report['workflow']} v{report['version']} run {report['run']} "
        f"{title.get(report['event'], report['event'])}"
    )
    lines = [
        f"Workflow: {report['workflow']}",
        f"Version: {report['version']}",
        f"Run: {report['run']}",
        f"Trigger: {report['trigger']}",
        f"Status: {report['status']}",
    ]
    if report["error_summary"]:
        lines.append(f"Summary: {report['error_summary']}")
    lines += _link_lines(report.get("links") or {})
    if report.get("replay"):
        lines += ["", f"Replay against the validation run: {report['replay']['summary']}"]
        for step in report["replay"].get("differences", []):
            lines.append(f"  differs  {step['step']}")
            lines += [f"             {line}" for line in step["lines"]]
    for step in report["failed_steps"]:
        lines += [
            "",
            f"Failing step: {step['step']}",
            *([f"Step page: {step['link']}"] if step.get("link") else []),
            f"Error: {json.dumps(step['error'], sort_keys=True)}",
            f"Request: {json.dumps(step['request'], sort_keys=True, indent=2)}",
            f"Response: {json.dumps(step['response'], sort_keys=True, indent=2)}",
            "Difference from the validation run: "
            + json.dumps(step["validation_diff"], sort_keys=True, indent=2),
        ]
    return subject, "\n".join(lines) + "\n"


def _link_lines(links: dict[str, Any]) -> list[str]:
    """The run's and the workflow's pages, or the note saying why there are none."""
    if not links.get("run"):
        return [f"Links: {links.get('note') or 'none'}"]
    return [f"Run page: {links['run']}", f"Workflow page: {links['workflow']}"]


def email_send(*, recipients: list[str], report: dict[str, Any]) -> None:
    """Send the report to ``recipients`` through the configured backend."""
    subject, body = email_text(report)
    message = EmailMessage(subject=subject, body=body, to=recipients)
    message.send(fail_silently=False)
