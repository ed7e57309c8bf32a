"""``mcpserve`` — serve flowpilot's tools to MCP clients (agents) over stdio or HTTP.

The arguments and the stdio token are checked before the MCP SDK is loaded (a few
seconds of CPU on a small machine), so a refused start answers at once.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import CommandError, CommandParser
from rest_framework import exceptions

from api.mcp.auth import TOKEN_ENV, user_for_token
from tools.commands import FlowpilotCommand


class Command(FlowpilotCommand):
    help = (
        "Serve flowpilot as an MCP server: list_tools, list_workflows, validate_workflow, "
        "plan_workflow (never approves), run_workflow (active versions), get_run. stdio "
        f"authenticates with --token or {TOKEN_ENV}; streamable HTTP with each request's "
        "`Authorization: Token <key>` header, as the REST API does."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
        parser.add_argument("--host", default="127.0.0.1", help="HTTP: the address to bind.")
        parser.add_argument("--port", type=int, default=8001, help="HTTP: the port.")
        parser.add_argument("--path", default="/mcp", help="HTTP: the endpoint's path.")
        parser.add_argument(
            "--token",
            help=f"stdio: the API token to act as (default: ${TOKEN_ENV}; prefer the variable, "
            "a command line is visible to other users of the machine).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["transport"] == "http":
            if options["token"]:
                raise CommandError(
                    "--token is for stdio; over HTTP each client sends `Authorization: Token <key>`"
                )
            if not 0 < options["port"] < 65536:
                raise CommandError(f"--port must be 1 to 65535, not {options['port']}")
            from api.mcp.server import serve_http

            self.stderr.write(
                f"flowpilot MCP server on http://{options['host']}:{options['port']}"
                f"{options['path']} (streamable HTTP)"
            )
            serve_http(host=options["host"], port=options["port"], path=options["path"])
            return
        token = options["token"] or os.environ.get(TOKEN_ENV, "")
        try:
            user_for_token(token)
        except exceptions.APIException as exc:
            raise CommandError(f"refused: {exc.detail}") from exc
        from api.mcp.server import serve_stdio

        serve_stdio(token=token)
