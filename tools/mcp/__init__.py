"""MCP client tools: tools contributed by an external MCP server (docs/mcp.md).

``config`` is the server file format, ``session`` the per-run sessions (the async
SDK driven from the engine's threads), ``discovery`` turns ``list_tools`` into specs,
``calls`` makes one ``call_tool`` and maps its result and errors.
"""
