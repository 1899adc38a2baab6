"""The platform's read-only MCP server (docs/mcp.md): agents ask what people ask the REST
API, with the same tokens and the same answers.

`tools` declares the tools; `calls` asks the REST API in-process as the caller, so who
may see what is the API's rule, never a copy; `endpoint` serves them at ``/mcp`` over
Streamable HTTP from the web process (WSGI, as the rest of the platform).
"""
