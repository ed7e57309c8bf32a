"""What one tool call receives and returns: the context a caller builds, the result.

A leaf module (it imports no other tools module but redaction, the breaker core, the
pacer's core and the MCP sessions),
so the registry, the HTTP client and the built-in providers all import these types at
module top.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from tools.breaker.core import CircuitBreakers
from tools.mcp.session import McpSessions
from tools.ratelimit.core import Pacer
from tools.redaction import Redactor


class CallTap(Protocol):
    """Stands between a tool and what it reaches (network, MCP server, disk) for one call.

    ``exchange(prepared, send, redactor)`` (HTTP tools) returns what ``send()`` would
    (a ``tools.http.transport.Received``) or raises as it would. ``mcp_exchange(request,
    send, redactor)`` (MCP tools; ``request`` is ``{server, tool, arguments}``) returns
    what ``send()`` would (the server's ``CallToolResult``) or raises as it would. A
    recorder calls ``send`` and keeps a masked copy; a replayer never calls it and
    answers from recordings. ``file_write(path, data, write)`` (the built-in tools that
    write a file): ``write()`` writes it; a replayer leaves the disk alone. Built by the
    caller per call (``runs.replay``) and handed over in ``ToolCallContext.tap``; None
    (the default) is the real thing, untouched.
    """

    def exchange(self, prepared: Any, send: Callable[[], Any], redactor: Redactor) -> Any: ...

    def mcp_exchange(
        self, request: dict[str, Any], send: Callable[[], Any], redactor: Redactor
    ) -> Any: ...

    def file_write(self, path: str, data: bytes, write: Callable[[], None]) -> None: ...


@dataclass(frozen=True)
class ToolCallContext:
    """Everything one tool call may use, built per run by the caller.

    ``env`` is where ``{{env.NAME}}`` is read (pass ``os.environ`` or a curated
    mapping); ``redactor`` collects the secret values used; ``http`` is the run's
    client; ``timeout`` overrides the tool's own; ``idempotency_key`` is sent in
    the tool's ``idempotency_header``; ``output_dir``/``data_dirs`` bound where
    built-in tools may write and read; ``breakers`` (None: none) guards every HTTP
    request by its host's circuit breaker; ``mcp`` holds the run's MCP sessions;
    ``tap`` (None: none) sees every HTTP exchange and MCP call of the call
    (``CallTap``); ``pacer`` (None: none) holds every HTTP request to its rate limit
    and to the pauses its API's headers asked for (``tools.ratelimit``); ``read_limit``
    is how much of one body is read.
    """

    env: Mapping[str, str]
    redactor: Redactor
    http: httpx.Client
    timeout: float | None = None
    idempotency_key: str | None = None
    max_response_bytes: int = 10 * 1024 * 1024
    # The calling step's size cap (``tools.sizes``): a body over it fails the call with
    # ``output_too_large`` instead of being cut and flagged. None: no step cap.
    max_output_bytes: int | None = None
    output_dir: Path | None = None
    data_dirs: tuple[Path, ...] = ()
    breakers: CircuitBreakers | None = None
    mcp: McpSessions | None = None  # the run's MCP sessions; None: one per call
    tap: CallTap | None = None  # records or replays this call's HTTP and MCP calls
    pacer: Pacer | None = None  # rate limits and adaptive pacing, shared by every worker
    run_id: int | None = None  # the calling run (a report says which run wrote it); None: none

    @property
    def read_limit(self) -> int:
        """The most of one decoded body read: the response limit, or the step's cap
        when that is lower (then reaching it fails the call: ``output_too_large``)."""
        if self.max_output_bytes is None:
            return self.max_response_bytes
        return min(self.max_response_bytes, self.max_output_bytes)

    @property
    def cut_fails(self) -> bool:
        """Whether a body cut at ``read_limit`` is refused (the step's cap cut it)
        rather than kept as a flagged, truncated text."""
        return (
            self.max_output_bytes is not None and self.max_output_bytes <= self.max_response_bytes
        )


@dataclass(frozen=True)
class ToolResult:
    """A tool's output. ``request`` (http tools) is ``{method, url, status, elapsed_ms}``
    with the URL redacted; ``truncated`` flags an oversized body cut at the limit."""

    output: Any
    truncated: bool = False
    request: dict | None = None
