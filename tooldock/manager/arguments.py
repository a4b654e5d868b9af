"""The manager's argument check: a `tools/call` whose arguments name a parameter the tool does not have, or
leave out one it requires, is answered with a tool error that says so and lists the tool's parameters.

The SDK's MCPServer ignores unknown arguments: `test_tool(namespace, tool_name, arguments={...})` ran the
tool with no input (the parameter is `input`), and `prepare_secret(name="X")` failed with a pydantic dump
about `key`. An LLM recovers from "unknown argument 'arguments': test_tool takes namespace, tool_name, input"
at once. It runs as the SDK's server middleware (`Server.middleware`), before the SDK validates anything;
types and values are still the SDK's and the tools' own to check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer

from tooldock.manager import context

Signature = tuple[tuple[str, ...], frozenset[str]]  # parameters in order, the required ones


def _signatures(tools: list[Any]) -> dict[str, Signature]:
    table: dict[str, Signature] = {}
    for tool in tools:
        schema = tool.input_schema or {}
        table[tool.name] = (tuple(schema.get("properties") or ()), frozenset(schema.get("required") or ()))
    return table


def problem(tool: str, arguments: Mapping[str, Any], signature: Signature) -> str | None:
    """What is wrong with the names of `arguments` for `tool`, or None."""
    names, required = signature
    unknown = [name for name in arguments if name not in names]
    missing = [name for name in names if name in required and name not in arguments]
    if not unknown and not missing:
        return None
    takes = ", ".join(f"{n} (required)" if n in required else n for n in names) or "no arguments"
    said = []
    if unknown:
        said.append(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}")
    if missing:
        said.append(f"missing required argument{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
    again = "with those names" if names else "without arguments"
    return f"{'; '.join(said)}: {tool} takes {takes}. Nothing was done; call it again {again}"


def argument_check(server: MCPServer) -> Any:
    """The middleware for `server`'s low-level server (its tools are all registered before it serves)."""
    table: dict[str, Signature] | None = None

    async def middleware(ctx: Any, call_next: Any) -> Any:
        nonlocal table
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, Mapping):
            return await call_next(ctx)
        name, arguments = params.get("name"), params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(name, str) or not isinstance(arguments, Mapping):
            return await call_next(ctx)  # the SDK's own validation answers these
        if table is None:
            table = _signatures(await server.list_tools())
        signature = table.get(name)
        found = problem(name, arguments, signature) if signature is not None else None
        if found is None:
            return await call_next(ctx)
        context.audit(name, "invalid_arguments", 0.0)
        text = f"Error executing tool {name}: invalid_arguments: {found}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    return middleware
