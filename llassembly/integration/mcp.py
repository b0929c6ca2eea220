"""MCP tools with what their servers declare: :func:`load_mcp_tools`.

Tools from an MCP server (``langchain-mcp-adapters``) already work as every LangChain tool
does: their arguments come from the JSON schema the server declares. The adapter drops the
*output* schema a server declares for a tool's structured results, so a plan would read such a
result as "any". :func:`load_mcp_tools` loads the tools as the adapter does and keeps each
output schema in the tool's ``metadata`` (see :func:`llassembly.compat.mcp_output_schema`):
the prompt then shows the result's fields, the checks before the run follow them, and the plan
reads the structured result itself (its fields by path), not its text.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool

from llassembly.compat import MCP_OUTPUT_SCHEMA
from llassembly.errors import UsageError


async def load_mcp_tools(session: Any, **options: Any) -> list[BaseTool]:
    """The tools of an MCP client session, each with its server's output schema.

    Args:
        session: An initialised ``mcp.ClientSession`` (e.g. from
            ``MultiServerMCPClient(...).session(name)``); the tools call the server through it,
            so use them while it is open. ``None`` with a ``connection`` option: each call opens
            a session of its own, as the adapter's tools do.
        options: Passed on to ``langchain_mcp_adapters.tools.load_mcp_tools``.

    Raises:
        UsageError: ``langchain-mcp-adapters`` is missing (``pip install "llassembly[mcp]"``).

    Example:
        >>> async with client.session("shop") as session:  # doctest: +SKIP
        ...     tools = await load_mcp_tools(session)
        ...     agent = create_agent(model, tools, middleware=[ToolsPlannerMiddleware()])
    """
    try:
        from langchain_mcp_adapters.tools import load_mcp_tools as load
    except ImportError as exc:  # pragma: no cover - the extra is installed where it is used
        raise UsageError(
            'load_mcp_tools needs langchain-mcp-adapters: pip install "llassembly[mcp]"'
        ) from exc
    tools: list[BaseTool] = await load(session, **options)
    server = options.get("server_name") if options.get("tool_name_prefix") else None
    if session is not None:
        schemas = await _output_schemas(session, f"{server}_" if server else "")
    else:  # the adapter's session-less mode: the schemas read over a session of the connection
        from langchain_mcp_adapters.sessions import create_session

        async with create_session(options["connection"]) as opened:
            await opened.initialize()
            schemas = await _output_schemas(opened, f"{server}_" if server else "")
    for tool in (t for t in tools if t.name in schemas):
        tool.metadata = {**(tool.metadata or {}), MCP_OUTPUT_SCHEMA: schemas[tool.name]}
    return tools


async def _output_schemas(session: Any, prefix: str) -> dict[str, Any]:
    """Each tool's output schema by its name (``prefix``: the adapter's documented rule)."""
    schemas: dict[str, Any] = {}
    cursor = None
    while True:
        listed = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
        schemas.update({prefix + t.name: t.outputSchema for t in listed.tools if t.outputSchema})
        if not (cursor := getattr(listed, "nextCursor", None)):
            return schemas
