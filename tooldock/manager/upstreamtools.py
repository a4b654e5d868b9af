"""`list_tools` and `test_tool` for a namespace that serves upstream MCP servers (its `tools.toml`).

Such a namespace has no tool files to read, and REST callers reach only the tools `active_toolsets` turns
on. So the manager asks the gateway as an MCP client does, on the namespace's own endpoint
(`/ns/<namespace>/mcp`, the bearer token): `tools/list` gives the active tools and `toolman_activate`, whose
description carries the whole catalog (`upstream.catalog.catalog_tools` reads it); a test activates its tool
on that session first (`toolman_activate`), so an inactive one runs too, and the session's activation ends
with it (no other caller's view changes).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tooldock.errors import GatewayError, Missing
from tooldock.manager.gateway import GatewayClient
from tooldock.namespace.toolsfile import TOOLS_FILE
from tooldock.runtime.http.rest import rest_value
from tooldock.upstream.catalog import ACTIVATE, catalog_tools
from tooldock.worker.protocol import error_text

NO_CHANGE: dict[str, list[str]] = {"tools_off": [], "resources_on": [], "resources_off": []}


@contextlib.asynccontextmanager
async def session(gateway: GatewayClient, namespace: str) -> AsyncIterator[Client]:
    """An MCP client session on the namespace's endpoint; a gateway it cannot reach is a GatewayError, a
    namespace it does not serve yet (its tools.toml written, no reload since) is Missing."""
    url = f"{gateway.url.rstrip('/')}/ns/{namespace}/mcp"
    if namespace not in await gateway.namespaces():
        if await gateway.health() is None:
            raise GatewayError(f"the gateway at {gateway.url} is not reachable; is it running (`tooldock serve`)?")
        raise Missing(f"the gateway does not serve namespace {namespace!r} yet: call reload_core(), then try again")
    try:
        async with httpx2.AsyncClient(headers=gateway.auth_headers(), timeout=httpx2.Timeout(60.0)) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
                yield client
    except (httpx2.HTTPError, OSError) as exc:
        raise GatewayError(
            f"the gateway at {gateway.url} did not answer on {url} ({type(exc).__name__}); is it running "
            "(`tooldock serve`), and does the namespace exist (reload_core)?"
        ) from None


async def list_tools(gateway: GatewayClient, namespace: str) -> list[dict[str, Any]]:
    """Every tool of the catalog, active or not, as `list_tools` lists a tool file's (plus "active")."""
    async with session(gateway, namespace) as client:
        listed = (await client.list_tools()).tools
    catalog = next((t for t in listed if t.name == ACTIVATE), None)
    if catalog is None:
        return [_entry(t.name, True, t.description) for t in listed]
    return [_entry(name, active, text) for name, active, text in catalog_tools(catalog.description or "")]


def _entry(name: str, active: bool, description: str | None) -> dict[str, Any]:
    first = (description or "").strip().split("\n\n")[0].strip()
    return {"name": name, "description": first, "filename": TOOLS_FILE, "served": True, "active": active}


async def test_tool(gateway: GatewayClient, namespace: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Activate `tool` on a session of its own, then call it: `test_tool`'s answer, the result as REST gives
    it (`rest_value`)."""
    async with session(gateway, namespace) as client:
        try:
            if tool != ACTIVATE:
                activated = _dump(await client.call_tool(ACTIVATE, {"tools_on": [tool], **NO_CHANGE}))
                if activated.get("isError"):  # an unknown name: the gateway's message names similar ones
                    return {
                        "success": False,
                        "error": error_text(activated) or "the tool failed",
                        "code": "tool_not_found",
                        "hint": "list_tools shows the names of the namespace's upstream tools",
                    }
            result = _dump(await client.call_tool(tool, arguments))
        except MCPError as err:
            return {"success": False, "error": err.error.message, "code": "invalid_arguments"}
    if result.get("isError"):
        return {"success": False, "error": error_text(result) or "the tool failed", "code": "tool_error"}
    return {"success": True, "result": rest_value(result, {})}


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    """The result as JSON, as the gateway's REST route holds it."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)
