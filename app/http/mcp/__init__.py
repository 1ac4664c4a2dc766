"""The agents served as MCP tools at `/mcp` (streamable HTTP, the MCP python-sdk).

`endpoint` is the MCP server and its mount; `app.http.questions` turns an agent's
questions (interrupt payloads, `tools.interrupts`) into MCP elicitation and back.
"""
