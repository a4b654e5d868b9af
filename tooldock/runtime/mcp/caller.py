"""Who an MCP request comes from, as the audit log records it (runtime.observe)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tooldock.runtime import requestid
from tooldock.runtime.observe import CallInfo, call_info


def connection_of(ctx: Any) -> Any:
    """The connection-scoped object a handler's per-request session wraps (SDK 2.x; no public accessor):
    what an upstream namespace keys a session's activation by."""
    return getattr(ctx.session, "_connection", ctx.session)


def caller_of(ctx: Any) -> dict[str, Any]:
    """Who an MCP request comes from, for the audit log: transport, address, clientInfo, protocol version."""
    request = getattr(ctx, "request", None)
    path = str(getattr(getattr(request, "url", None), "path", "") or "")
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    client_info = getattr(params, "client_info", None)
    return {
        "front_end": "sse" if path.endswith("/messages") else "mcp",
        "client": getattr(getattr(request, "client", None), "host", None),
        "client_info": {"name": client_info.name, "version": client_info.version} if client_info else None,
        "protocol": getattr(ctx, "protocol_version", None) or getattr(params, "protocol_version", None),
    }


@contextlib.contextmanager
def calling(ctx: Any) -> Iterator[CallInfo]:
    """The call context of an MCP request, for the engine's audit line."""
    with call_info(**caller_of(ctx)) as info:
        yield info


@contextlib.contextmanager
def request_id_of(ctx: Any) -> Iterator[None]:
    """The HTTP request's id for what a handler does (the SDK's handler tasks do not inherit it)."""
    token = requestid.current.set(requestid.of_scope(getattr(ctx, "request", None)))
    try:
        yield
    finally:
        requestid.current.reset(token)


async def with_request_id(ctx: Any, call_next: Any) -> Any:
    """Server middleware (`Server.middleware`): every handler of an MCP request runs with the HTTP request's
    id as `requestid.current`, so what it sends on (the manager's calls to the gateway) carries it."""
    with request_id_of(ctx):
        return await call_next(ctx)
