"""One ``call_tool`` on an MCP server, its result mapped to a step output and its
failures to the typed errors (docs/mcp.md, "Errors").

* the server could not be started or reached: ``tool_unreachable``, retried;
* no answer within the timeout: ``tool_timeout``, retried;
* the connection dropped during the call: ``tool_unreachable``, retried;
* the server refused the arguments or the tool (JSON-RPC -32602): ``tool_input_invalid``;
* another protocol error, or the tool answered ``isError: true``: ``tool_call_failed``.

A timeout or a dropped connection of a tool that is not idempotent is
``outcome_unknown`` instead (fatal): the server may have acted.

Structured content (``structuredContent``) becomes the output as it is; otherwise the
text content, joined, becomes ``{"text": …}`` (with any non-text content under
``content``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tools.calls import ToolCallContext, ToolResult
from tools.errors import (
    FlowpilotError,
    ToolCallFailed,
    ToolInputError,
    ToolOutcomeUnknown,
    ToolResponseTooLarge,
    ToolTimeout,
    ToolUnreachable,
)
from tools.mcp.config import McpToolConfig
from tools.mcp.session import McpSessions
from tools.spec import ToolSpec

if TYPE_CHECKING:  # the SDK loads with the first call (tools.mcp.session)
    import mcp_types as types
    from mcp import Client
    from mcp.shared.exceptions import MCPError

# A call's deadline is the tool's timeout, which the SDK enforces and answers as a
# request timeout; the session's own deadline, this much later, holds if it does not.
CALL_DEADLINE_GRACE = 5.0


def call_mcp_tool(spec: ToolSpec, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
    """Call an ``mcp`` tool in the run's session (``ctx.mcp``), or — for a caller
    without one — in a session opened and closed for this call."""
    assert spec.mcp is not None
    if ctx.mcp is not None:
        return _call(ctx.mcp, spec, spec.mcp, arguments, ctx)
    with McpSessions(env=ctx.env, redactor=ctx.redactor) as sessions:
        return _call(sessions, spec, spec.mcp, arguments, ctx)


def _call(
    sessions: McpSessions,
    spec: ToolSpec,
    config: McpToolConfig,
    arguments: dict[str, Any],
    ctx: ToolCallContext,
) -> ToolResult:
    from mcp.shared.exceptions import MCPError  # the SDK, on the call path only

    timeout = ctx.timeout or spec.timeout
    who = f"tool {spec.name!r} (MCP server {config.server.name!r})"
    try:
        result = _result(sessions, config, arguments, ctx, timeout)
    except ToolTimeout as exc:  # the session's own deadline, past the SDK's
        raise _maybe_sent(spec, ToolTimeout(f"{who} did not answer within {timeout:g}s")) from exc
    except FlowpilotError:
        raise
    except MCPError as exc:
        junk = sessions.stdout_junk(config.server)
        if junk is not None:  # the server broke the protocol: say how
            who += f" wrote on stdout what is not JSON-RPC ({ctx.redactor.scrub_text(junk)}) and"
        raise _protocol_error(spec, exc, who, ctx, timeout) from exc
    except Exception as exc:  # the transport broke mid-call: the session is gone
        sessions.discard(config.server)
        message = ctx.redactor.scrub_text(f"{who}: the session failed during the call: {exc}")
        raise _maybe_sent(spec, ToolUnreachable(message)) from exc
    if result.is_error:
        text = ctx.redactor.scrub_text(_text(result) or "(no message)")
        raise ToolCallFailed(f"{who} reported an error: {text}")
    output = _output(result)
    size = len(json.dumps(output, default=str).encode())
    if size > ctx.max_response_bytes:
        raise ToolResponseTooLarge(
            f"{who} answered {size} bytes, over the limit of {ctx.max_response_bytes}"
        )
    return ToolResult(output=output)


def _result(
    sessions: McpSessions,
    config: McpToolConfig,
    arguments: dict[str, Any],
    ctx: ToolCallContext,
    timeout: float,
) -> types.CallToolResult:
    """The server's answer; through ``ctx.tap`` when there is one (recorded, or replayed
    from a recording without starting or reaching the server: ``tools.calls.CallTap``)."""

    async def call(client: Client) -> types.CallToolResult:
        return await client.call_tool(config.tool, arguments, read_timeout_seconds=timeout)

    within = timeout + CALL_DEADLINE_GRACE
    if ctx.tap is None:
        return sessions.run(config.server, call, within=within)
    sessions.register_secrets(config.server)  # masked alike whether the session opens or not
    request = {"server": config.server.name, "tool": config.tool, "arguments": arguments}
    return ctx.tap.mcp_exchange(
        request, lambda: sessions.run(config.server, call, within=within), ctx.redactor
    )


def _protocol_error(
    spec: ToolSpec, exc: MCPError, who: str, ctx: ToolCallContext, timeout: float
) -> FlowpilotError:
    import mcp_types as types

    message = ctx.redactor.scrub_text(exc.error.message)
    code = exc.error.code
    if code == types.REQUEST_TIMEOUT:
        return _maybe_sent(spec, ToolTimeout(f"{who} did not answer within {timeout:g}s"))
    if code == types.CONNECTION_CLOSED:
        return _maybe_sent(spec, ToolUnreachable(f"{who}: the connection closed: {message}"))
    if code == types.INVALID_PARAMS:
        return ToolInputError(f"{who} refused the call: {message}")
    return ToolCallFailed(f"{who}: protocol error {code}: {message}")


def _maybe_sent(spec: ToolSpec, error: FlowpilotError) -> FlowpilotError:
    """A retryable failure after the request was sent: repeated only when idempotent."""
    if spec.idempotent:
        return error
    return ToolOutcomeUnknown(
        f"{error.message}; the tool is not idempotent and may have acted: check the target "
        "system, then restart from this step"
    )


def _text(result: types.CallToolResult) -> str:
    import mcp_types as types

    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _output(result: types.CallToolResult) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    import mcp_types as types

    output: dict[str, Any] = {"text": _text(result)}
    other = [c.model_dump(mode="json", by_alias=True, exclude_none=True)
             for c in result.content if not isinstance(c, types.TextContent)]  # fmt: skip
    if other:
        output["content"] = other
    return output
