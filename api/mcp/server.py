"""flowpilot served as an MCP server (the official ``mcp`` SDK's ``MCPServer``).

Eight tools — ``list_tools``, ``list_workflows``, ``validate_workflow``,
``plan_workflow`` (never approves a plan), ``run_workflow`` (active versions only),
``get_run``, ``list_approvals`` and ``decide_approval`` (a running workflow's approval
step, as the person the token names) — each a thin wrapper over ``api.mcp.handlers``,
which does what the REST API's view does. Every call authenticates
(``api.mcp.auth``) and checks the API's permissions; a refusal is answered as an
``isError`` result whose structured content is the API's error body ``{code,
message, details, status}``; an unexpected failure is logged here and answered as
``internal_error`` without its text. Two transports: stdio (``serve_stdio``) and
streamable HTTP (``http_app``), where a request without a valid token is refused with
401 before MCP sees it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import uvicorn
from django.conf import settings
from django.db import close_old_connections, connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from rest_framework import exceptions
from starlette.types import ASGIApp, Receive, Scope, Send

from api.errors import api_exception_handler, error_body
from api.mcp import handlers
from api.mcp.auth import user_for_header, user_for_token

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger("flowpilot.api.mcp")

Result = Annotated[CallToolResult, dict[str, Any]]
Name = Annotated[str, Field(max_length=100)]
Wait = Annotated[float, Field(ge=0, le=3600, description="Seconds to wait for the end.")]
Limit = Annotated[int, Field(ge=1, le=handlers.MAX_LIST)]
LOOPBACK = ("127.0.0.1", "localhost", "::1")
INSTRUCTIONS = (
    "flowpilot plans, validates and runs API workflows. Design with list_tools, "
    "validate_workflow and plan_workflow: a plan is stored pending review and a person "
    "approves it in flowpilot; only then does run_workflow run it. Read results with get_run. "
    "A run waiting at an approval step is decided with list_approvals and decide_approval, "
    "by the person the token names."
)


class Caller:
    """How a call names its user: the stdio process's token, else the HTTP request's
    ``Authorization`` header."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token

    def user(self, ctx: Context) -> User:
        if self.token is not None:
            return user_for_token(self.token)
        request = ctx.request_context.request
        headers = getattr(request, "headers", None) or {}
        return user_for_header(headers.get("authorization"))


def answer(data: dict[str, Any], *, error: bool = False) -> CallToolResult:
    text = json.dumps(data, ensure_ascii=False, default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=data, is_error=error
    )


def call(
    caller: Caller, ctx: Context, handler: Callable[..., dict], **arguments: Any
) -> CallToolResult:
    """One tool call on a worker thread: authenticate, run the handler, answer.

    Database connections are handled as Django handles them around a request."""
    close_old_connections()
    try:
        return answer(handler(user=caller.user(ctx), **arguments))
    except Exception as exc:  # every failure becomes an answer (logged), never a crash
        response = api_exception_handler(exc, {})
        if response is None:
            logger.exception("MCP tool %s failed", handler.__name__)
            body = error_body("internal_error", "the server failed; its log says why")
            return answer({**body, "status": 500}, error=True)
        return answer({**dict(response.data), "status": response.status_code}, error=True)
    finally:
        connections.close_all()


def build_server(*, caller: Caller) -> MCPServer:
    """The MCP server with flowpilot's eight tools, calling as ``caller`` says."""
    server = MCPServer("flowpilot", instructions=INSTRUCTIONS, version="1")
    read = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

    def list_tools(
        ctx: Context, kind: str | None = None, search: Name | None = None, limit: Limit = 100
    ) -> Result:
        """The registered tools (http, mcp, builtin) with input schemas and outputs."""
        return call(caller, ctx, handlers.list_tools, kind=kind, search=search, limit=limit)

    def list_workflows(
        ctx: Context, name: Name | None = None, status: str | None = None, limit: Limit = 100
    ) -> Result:
        """Stored workflow versions with their status (only `active` ones run)."""
        return call(caller, ctx, handlers.list_workflows, name=name, status=status, limit=limit)

    def validate_workflow(
        ctx: Context, definition: dict[str, Any] | None = None, source: str | None = None
    ) -> Result:
        """Every problem of a workflow definition (an object, or YAML/JSON text in `source`),
        each with its code, JSON path and message. Nothing is stored."""
        return call(caller, ctx, handlers.validate_workflow, definition=definition, source=source)

    def plan_workflow(
        ctx: Context, goal: str, sample_inputs: dict[str, Any] | None = None, wait: Wait = 60
    ) -> Result:
        """Ask the planner for a workflow reaching `goal`. The proposed version is stored
        pending review: a person must approve it in flowpilot before it can run."""
        return call(
            caller, ctx, handlers.plan_workflow, goal=goal, sample_inputs=sample_inputs, wait=wait
        )

    def run_workflow(
        ctx: Context,
        workflow: Name,
        version: Annotated[int, Field(ge=1)] | None = None,
        inputs: dict[str, Any] | None = None,
        wait: Wait = 0,
        idempotency_key: Annotated[str, Field(max_length=255)] | None = None,
    ) -> Result:
        """Run the active version of a workflow (or the given active version) with `inputs`.
        With `wait`, answer when the run has finished or that many seconds have passed."""
        return call(
            caller,
            ctx,
            handlers.run_workflow,
            workflow=workflow,
            version=version,
            inputs=inputs,
            wait=wait,
            idempotency_key=idempotency_key,
        )

    def get_run(ctx: Context, run_id: Annotated[int, Field(ge=1)], wait: Wait = 0) -> Result:
        """A run: status, outputs, error summary and every step's result (secrets masked)."""
        return call(caller, ctx, handlers.get_run, run_id=run_id, wait=wait)

    def list_approvals(ctx: Context, mine: bool = True, limit: Limit = 100) -> Result:
        """Approval requests of running workflows, newest first (`mine`: only the pending
        ones you may decide), each with the exact requests the run will send next."""
        return call(caller, ctx, handlers.list_approvals, mine=mine, limit=limit)

    def decide_approval(
        ctx: Context,
        approval_id: Annotated[int, Field(ge=1)],
        approve: bool,
        values: dict[str, Any] | None = None,
        comment: Annotated[str, Field(max_length=2000)] = "",
        preview_hash: Annotated[str, Field(max_length=64)] = "",
    ) -> Result:
        """Approve (with the form's `values`) or reject an approval request; give the
        `preview_hash` you were shown. The run goes on once enough people approved."""
        return call(
            caller,
            ctx,
            handlers.decide_approval,
            approval_id=approval_id,
            approve=approve,
            values=values,
            comment=comment,
            preview_hash=preview_hash,
        )

    server.add_tool(list_tools, annotations=read)
    server.add_tool(list_workflows, annotations=read)
    server.add_tool(validate_workflow, annotations=read)
    server.add_tool(plan_workflow, annotations=ToolAnnotations(destructiveHint=False))
    server.add_tool(run_workflow, annotations=ToolAnnotations(openWorldHint=True))
    server.add_tool(get_run, annotations=read)
    server.add_tool(list_approvals, annotations=read)
    server.add_tool(decide_approval, annotations=ToolAnnotations(destructiveHint=False))
    return server


def serve_stdio(*, token: str | None) -> None:
    """Serve on stdin/stdout as the owner of ``token`` (checked first: a bad token is an
    ``AuthenticationFailed`` / ``NotAuthenticated`` before anything is served)."""
    user_for_token(token)
    build_server(caller=Caller(token=token or "")).run("stdio")


def transport_security(host: str) -> TransportSecuritySettings | None:
    """DNS-rebinding protection: on loopback the SDK's own; elsewhere the Host header must
    be one of ``ALLOWED_HOSTS`` (off when it holds ``*``)."""
    if host in LOOPBACK:
        return None
    hosts = list(settings.ALLOWED_HOSTS)
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        allowed_hosts=[h for name in hosts for h in (name, f"{name}:*")],
        allowed_origins=[f"{scheme}://{name}" for name in hosts for scheme in ("http", "https")],
    )


def token_required(app: ASGIApp) -> ASGIApp:
    """Refuse an HTTP request without a valid token with 401 and the API's error body."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            refusal = await anyio.to_thread.run_sync(_refusal, header)
            if refusal is not None:
                await _send_json(send, 401, refusal)
                return
        await app(scope, receive, send)

    return guarded


def _refusal(header: str) -> dict | None:
    """The API's 401 body for this ``Authorization`` header, or None when it is valid."""
    close_old_connections()
    try:
        user_for_header(header)
    except exceptions.APIException as exc:
        response = api_exception_handler(exc, {})
        assert response is not None  # the handler answers every APIException
        return dict(response.data)
    finally:
        connections.close_all()
    return None


async def _send_json(send: Send, status: int, body: dict) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"www-authenticate", b"Token"),
        (b"content-length", str(len(payload)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def http_app(*, host: str = "127.0.0.1", path: str = "/mcp") -> ASGIApp:
    """The streamable-HTTP ASGI app (serve it with uvicorn), behind token authentication."""
    server = build_server(caller=Caller())
    app = server.streamable_http_app(
        streamable_http_path=path, transport_security=transport_security(host), host=host
    )
    return token_required(app)


def serve_http(*, host: str, port: int, path: str = "/mcp", log_level: str = "info") -> None:
    uvicorn.run(http_app(host=host, path=path), host=host, port=port, log_level=log_level)
