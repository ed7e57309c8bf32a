"""Redaction by construction: secrets never reach what is stored or shown.

A :class:`Redactor` is created per run (never module state). Every secret value
resolved while calling tools is registered with :meth:`Redactor.add`; whatever
is logged, stored or shown afterwards goes through :meth:`Redactor.scrub`.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_SECRET_LENGTH = 4

_SENSITIVE_HEADER = re.compile(
    r"^(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key|apikey"
    r"|x-auth-token|x-access-token|x-.*-(key|token|secret))$|(secret|password|token|api[-_]?key)",
    re.IGNORECASE,
)


class Redactor:
    """Remembers secret values and masks them in text and data.

    Values shorter than ``MIN_SECRET_LENGTH`` characters are ignored: masking
    ``"a"`` everywhere would destroy output without protecting anything. For each
    secret, its URL-encoded forms are registered too, so it is also masked inside
    rendered URLs.
    """

    def __init__(self, secrets: list[str] | tuple[str, ...] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()
        for secret in secrets:
            self.add(secret)

    def add(self, value: str | None) -> None:
        """Register a secret (and its percent-encoded variants)."""
        if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH:
            return
        variants = {value, quote(value, safe=""), quote_plus(value), quote(value)}
        with self._lock:
            if variants - self._secrets:
                self._secrets |= variants
                self._pattern = None

    def add_basic_auth(self, username: str, password: str) -> None:
        """Register a password and the base64 ``user:password`` token sent for it."""
        self.add(password)
        token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        if password:
            self.add(token)

    def __len__(self) -> int:
        return len(self._secrets)

    def _compiled(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._pattern is None and self._secrets:
                ordered = sorted(self._secrets, key=lambda s: (-len(s), s))
                self._pattern = re.compile("|".join(re.escape(s) for s in ordered))
            return self._pattern

    def scrub_text(self, text: str) -> str:
        """``text`` with every registered secret replaced by ``***`` (longest first)."""
        pattern = self._compiled()
        if pattern is None or not text:
            return text
        return pattern.sub(MASK, text)

    def scrub(self, obj: Any) -> Any:
        """A deep copy of ``obj`` (dicts, lists, tuples, strings) with secrets masked.

        Dict keys are scrubbed too. Other leaves (numbers, booleans, None) are
        returned as they are.
        """
        if isinstance(obj, str):
            return self.scrub_text(obj)
        if isinstance(obj, Mapping):
            return {self.scrub(k): self.scrub(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.scrub(item) for item in obj]
        return obj


def is_sensitive_header(name: str) -> bool:
    """Whether a header carries credentials (Authorization, Cookie, X-API-Key, *-Token…)."""
    return bool(_SENSITIVE_HEADER.search(name.strip()))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` with credential-carrying values replaced by ``***``."""
    return {k: (MASK if is_sensitive_header(k) else v) for k, v in headers.items()}
