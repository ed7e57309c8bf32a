"""How a secret is masked: by value, only where stored or shown.

A :class:`Redactor` is created per run (never module state). *What* is secret is
decided by :mod:`tools.secrets` from the tool definitions, never guessed from the
data (see docs/security.md); each such value is registered with
:meth:`Redactor.add_secret`, and whatever is *stored or shown* afterwards (step
records, errors, logs, prompts, admin pages, command output, failure reports) goes
through :meth:`Redactor.scrub` / :meth:`Redactor.scrub_text`. Values handed from
step to step are never scrubbed: masking is for copies, never for data in flight.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit

MASK = "***"
MIN_SECRET_LENGTH = 4
MIN_URL_PART_LENGTH = 8  # shorter paths/queries of a secret URL ("/api") are not secret
_URL = re.compile(r"https?://[^\s\"'<>]+", re.IGNORECASE)

_SENSITIVE_HEADER = re.compile(
    r"^(authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key|apikey"
    r"|x-auth-token|x-access-token|x-.*-(key|token|secret))$|(secret|password|token|api[-_]?key)",
    re.IGNORECASE,
)


def basic_token(username: str, password: str) -> str:
    """The base64 ``username:password`` an ``Authorization: Basic`` header carries."""
    return base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


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
            self.add_secret(secret)

    def add_secret(self, value: str | None) -> None:
        """Register a secret value: from now on it is masked in whatever is stored or shown.

        This is the one way to declare a secret at run time (auth credentials, declared
        secret headers/params/env values, OAuth2 tokens and client secrets). Its
        percent-encoded forms are registered too. A URL held by the value (a webhook
        URL such as ``https://hooks.example/T0/B1/XYZ``) also registers its path and
        query, so a server echoing only the path cannot reveal it.
        """
        if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH:
            return
        variants = {value, quote(value, safe=""), quote_plus(value), quote(value)}
        for part in _url_parts(value):
            variants |= {part, quote(part)}
        with self._lock:
            if variants - self._secrets:
                self._secrets |= variants
                self._pattern = None

    def add_basic_auth(self, username: str, password: str) -> None:
        """Register a password and the base64 ``user:password`` token sent for it."""
        self.add_secret(password)
        if password:
            self.add_secret(basic_token(username, password))

    def __len__(self) -> int:
        return len(self._secrets)

    def _compiled(self) -> re.Pattern[str] | None:
        pattern = self._pattern  # one read: a pattern once made serves until a secret is added
        if pattern is not None:
            return pattern
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

        Masking is by value: a string (dict keys included) is masked where it holds a
        registered secret; a key's *name* never masks anything. Other leaves (numbers,
        booleans, None) are returned as they are. The walk is iterative, so a deeply
        nested response (hundreds of levels) cannot exhaust the recursion limit.
        """
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(obj, root, 0)]
        while stack:
            value, parent, key = stack.pop()
            if isinstance(value, str):
                parent[key] = self.scrub_text(value)
            elif isinstance(value, Mapping):
                copy: dict[Any, Any] = {}
                parent[key] = copy
                for name, item in value.items():
                    shown = self.scrub_text(name) if isinstance(name, str) else name
                    copy[shown] = None
                    stack.append((item, copy, shown))
            elif isinstance(value, list | tuple):
                items: list[Any] = [None] * len(value)
                parent[key] = items
                stack.extend((item, items, index) for index, item in enumerate(value))
            else:
                parent[key] = value
        return root[0]


def _url_parts(value: str) -> set[str]:
    """Path-and-query, path and query of every URL in ``value`` (long enough to be secret)."""
    parts: set[str] = set()
    for match in _URL.finditer(value):
        try:
            url = urlsplit(match.group(0))
        except ValueError:
            continue
        path_query = url.path + (f"?{url.query}" if url.query else "")
        for part in (path_query, url.path, url.path.lstrip("/"), url.query):
            if len(part) >= MIN_URL_PART_LENGTH:
                parts.add(part)
    return parts


def is_sensitive_header(name: str) -> bool:
    """Whether a header carries credentials (Authorization, Cookie, X-API-Key, *-Token…)."""
    return bool(_SENSITIVE_HEADER.search(name.strip()))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``headers`` with credential-carrying values replaced by ``***``."""
    return {k: (MASK if is_sensitive_header(k) else v) for k, v in headers.items()}
