"""flowpilot as an MCP server: agents list, validate, plan (never approve), run and read
workflows over stdio or streamable HTTP, with the REST API's authentication and
permissions (docs/mcp.md, "flowpilot as an MCP server")."""
