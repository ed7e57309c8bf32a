"""What one tool call receives and returns: the context a caller builds, the result.

A leaf module (it imports no other tools module but redaction, the breaker core and the MCP
sessions),
so the registry, the HTTP client and the built-in providers all import these types at
module top.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tools.breaker.core import CircuitBreakers
from tools.mcp.session import McpSessions
from tools.redaction import Redactor


@dataclass(frozen=True)
class ToolCallContext:
    """Everything one tool call may use, built per run by the caller.

    ``env`` is where ``{{env.NAME}}`` is read (pass ``os.environ`` or a curated
    mapping); ``redactor`` collects the secret values used; ``http`` is the run's
    client; ``timeout`` overrides the tool's own; ``idempotency_key`` is sent in
    the tool's ``idempotency_header``; ``output_dir``/``data_dirs`` bound where
    built-in tools may write and read; ``breakers`` (None: none) guards every HTTP
    request by its host's circuit breaker; ``mcp`` holds the run's MCP sessions.
    """

    env: Mapping[str, str]
    redactor: Redactor
    http: httpx.Client
    timeout: float | None = None
    idempotency_key: str | None = None
    max_response_bytes: int = 10 * 1024 * 1024
    output_dir: Path | None = None
    data_dirs: tuple[Path, ...] = ()
    breakers: CircuitBreakers | None = None
    mcp: McpSessions | None = None  # the run's MCP sessions; None: one per call


@dataclass(frozen=True)
class ToolResult:
    """A tool's output. ``request`` (http tools) is ``{method, url, status, elapsed_ms}``
    with the URL redacted; ``truncated`` flags an oversized body cut at the limit."""

    output: Any
    truncated: bool = False
    request: dict | None = None
