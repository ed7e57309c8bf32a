"""Loopback parts of the notification tests: an SMTP server and a webhook receiver.

``SMTPServer`` is aiosmtpd on 127.0.0.1 (a real SMTP conversation); ``WebhookReceiver``
verifies each POST's HMAC signature like a real consumer would, and can answer 500
for the first N requests.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Collect:
    def __init__(self) -> None:
        self.messages: list[email.message.EmailMessage] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(
            email.message_from_bytes(envelope.content, policy=email.policy.default)
        )
        return "250 OK"


class SMTPServer:
    def __init__(self) -> None:
        self.handler = _Collect()
        self.port = free_port()
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> SMTPServer:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()

    @property
    def messages(self):
        return self.handler.messages


class WebhookReceiver:
    """Records every POST with whether its signature verified under ``key``."""

    def __init__(self, key: str, *, fail_first: int = 0) -> None:
        self.key = key
        self.fail_first = fail_first
        self.received: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms stalls

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                stamp = self.headers["X-Flowpilot-Timestamp"]
                expected = hmac.new(
                    receiver.key.encode(), f"{stamp}.".encode() + body, hashlib.sha256
                ).hexdigest()
                verified = hmac.compare_digest(
                    f"sha256={expected}", self.headers["X-Flowpilot-Signature"]
                )
                receiver.received.append(
                    {
                        "verified": verified,
                        "body": json.loads(body),
                        "delivery": self.headers["X-Flowpilot-Delivery"],
                    }
                )
                status = 500 if len(receiver.received) <= receiver.fail_first else 200
                status = status if verified else 401
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> WebhookReceiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
