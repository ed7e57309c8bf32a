"""A server's ``list_tools`` → ``ToolSpec(kind="mcp")`` values.

Each tool is named ``<server>_<tool>``: characters outside ``[a-zA-Z0-9_-]`` become
``_`` and the name is cut to 64 characters, so it matches the tool-name pattern. Two
tools that end up with one name are an error naming both. The description, the
input schema and — from the output schema's properties — the outputs and their
types (``output_types``: each property's schema, bounded in size) come from the
server; ``idempotent`` from the server file or else the ``idempotentHint`` (or
``readOnlyHint``) annotation, default false as in the MCP specification.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.conf import settings
from pydantic import ValidationError

from tools.errors import FlowpilotError, ToolConfigError, ToolTimeout, ToolUnreachable
from tools.mcp.config import McpServer, McpToolConfig
from tools.mcp.session import McpSessions, list_all_tools
from tools.output_types import fields_of
from tools.redaction import Redactor
from tools.spec import ToolSpec

if TYPE_CHECKING:  # the SDK loads when a server is listed (tools.mcp.session)
    import mcp_types as types


def mcp_tool_name(server: str, tool: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", f"{server}_{tool}")[:64]


def mcp_server_specs(*, server: McpServer, env: Mapping[str, str]) -> list[ToolSpec]:
    """Connect to ``server`` (templates rendered with ``env``), list its tools and
    return their specs sorted by name. Raises ``ToolUnreachable`` when it cannot be
    reached, ``ToolConfigError`` when a tool cannot be registered."""
    return mcp_server_read(server=server, env=env)[0]


def mcp_server_read(
    *, server: McpServer, env: Mapping[str, str]
) -> tuple[list[ToolSpec], dict[str, str]]:
    """``mcp_server_specs``, and what the server said of itself in the ``initialize``
    handshake: ``{"name": …, "version": …}`` (empty strings when it said nothing)."""
    listed, info = _listed(server, env)
    return _specs(server, listed), info


def _specs(server: McpServer, listed: list[types.Tool]) -> list[ToolSpec]:
    specs: dict[str, ToolSpec] = {}
    problems: list[str] = []
    for tool in sorted(listed, key=lambda t: t.name):
        name = mcp_tool_name(server.name, tool.name)
        if name in specs:
            config = specs[name].mcp
            earlier = config.tool if config is not None else name
            problems.append(f"tools {earlier!r} and {tool.name!r} are both {name!r}")
            continue
        try:
            specs[name] = _spec(server, tool, name)
        except ValidationError as exc:
            first = exc.errors()[0]
            problems.append(f"tool {tool.name!r}: {first['msg']}")
    listed_names = {tool.name for tool in listed}
    problems += [
        f"`deprecated` names tool {name!r}, which the server does not list"
        for name in sorted(server.deprecated)
        if name not in listed_names
    ]
    if problems:
        raise ToolConfigError(f"MCP server {server.name!r}: " + "; ".join(problems))
    return [specs[name] for name in sorted(specs)]


def _listed(server: McpServer, env: Mapping[str, str]) -> tuple[list[types.Tool], dict[str, str]]:
    """The server's tools within ``FLOWPILOT_MCP_LIST_TIMEOUT``, and its name and
    version from the handshake; a server that breaks the session while listing (it
    closed, or wrote what is not JSON-RPC) is ``ToolUnreachable`` naming it, like one
    that cannot be started."""
    with McpSessions(env=env, redactor=Redactor()) as sessions:
        try:
            return sessions.run(
                server, list_tools_and_info, within=settings.FLOWPILOT_MCP_LIST_TIMEOUT
            )
        except ToolTimeout as exc:
            raise ToolTimeout(
                f"{exc.message} listing its tools (FLOWPILOT_MCP_LIST_TIMEOUT)"
            ) from exc
        except FlowpilotError:
            raise
        except Exception as exc:  # the SDK's protocol and transport errors
            raise ToolUnreachable(
                f"MCP server {server.name!r} failed while listing its tools: "
                f"{type(exc).__name__}: {exc}"
            ) from exc


async def list_tools_and_info(client: Any) -> tuple[list[types.Tool], dict[str, str]]:
    """Every tool the server lists, and its ``serverInfo`` (name, version)."""
    tools = await list_all_tools(client)
    info = getattr(client, "server_info", None)
    return tools, {
        "name": str(getattr(info, "name", "") or "")[:200],
        "version": str(getattr(info, "version", "") or "")[:100],
    }


def _spec(server: McpServer, tool: types.Tool, name: str) -> ToolSpec:
    hints = tool.annotations
    hinted = bool(hints and (hints.idempotent_hint or hints.read_only_hint))
    outputs = sorted((tool.output_schema or {}).get("properties", {}))
    return ToolSpec(
        name=name,
        kind="mcp",
        description=tool.description or tool.title or "",
        input_schema=tool.input_schema or {"type": "object", "properties": {}},
        outputs=outputs,
        output_types=fields_of(tool.output_schema) or None,
        idempotent=hinted if server.idempotent is None else server.idempotent,
        retry=server.retry,
        timeout=server.timeout,
        secret_env=list(server.secret_env),
        mcp=McpToolConfig(server=server, tool=tool.name),
        deprecated=tool.name in server.deprecated,
        replacement=server.deprecated.get(tool.name),
        queue=server.queue,
    )
