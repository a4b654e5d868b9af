"""The client's request as a Context tool reads it in the worker, as FastMCP serving the file would show it.

The gateway sends what a tool may read of the MCP request it serves with each call (the worker protocol's
`request` field, runtime/mcp/callcontext.py):

    {"id": 7, "meta": {"progressToken": 1, "acme/trace": "t-1", ...}, "protocol": "2026-07-28",
     "clientInfo": {"name": "claude-ai", "version": "0.1.0"}, "capabilities": {"sampling": {}},
     "transport": "streamable-http"}

The call's connection (direct.py) is built from it: the request's `_meta` is the params' `_meta`
(`ctx.request_context.meta`, `ctx.client_id`), its id the request id (`ctx.request_id`), the client's info and
capabilities the connection's `initialize` params (`ctx.session.client_params`,
`ctx.session.check_client_capability`), less the questions the gateway cannot put to the client.

The connection itself still speaks 2025-11-25, whatever the client speaks: the worker's server keeps a
back-channel, so an imperative `ctx.elicit()` or sampling call is relayed to a 2025 client or recorded for
a 2026-07-28 client's next round (runtime/mcp/inputreq.py). The protocol version a tool reads
(`ctx.request_context.protocol_version`) is the client's all the same: a server middleware puts it in the
request context, and fastmcp's era check (`Context._is_modern_protocol`, which would refuse `ctx.elicit()` on
a 2026-07-28 request) is told the back-channel is there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from fastmcp.server import context as fastmcp_context
from pydantic import ValidationError

from tooldock.worker.callstore import CALL

TRANSPORTS = ("streamable-http", "sse")
_QUESTIONS = ("sampling", "elicitation", "roots")  # what the worker asks through the gateway (direct.UNDECLARED)


def request_of(message: dict[str, Any]) -> dict[str, Any]:
    """The well-formed parts of a worker request's `request` field ({} when it has none)."""
    found = message.get("request")
    if not isinstance(found, dict):
        return {}
    kept: dict[str, Any] = {}
    rid = found.get("id")
    if isinstance(rid, (str, int)) and not isinstance(rid, bool):
        kept["id"] = rid
    for name in ("meta", "clientInfo", "capabilities"):
        if isinstance(found.get(name), dict):
            kept[name] = found[name]
    if isinstance(found.get("protocol"), str):
        kept["protocol"] = found["protocol"]
    if found.get("transport") in TRANSPORTS:
        kept["transport"] = found["transport"]
    return kept


def client_params(request: Mapping[str, Any], flags: Mapping[str, Any], protocol: str, fallback: Any) -> Any:
    """The connection's `initialize` params: the client's info and capabilities as it declared them, but a
    question it may not be asked (`flags`: what the gateway can put to it) is left out, as before."""
    capabilities = types.ClientCapabilities()
    if isinstance(request.get("capabilities"), dict):
        try:
            capabilities = types.ClientCapabilities.model_validate(request["capabilities"], by_name=False)
        except ValidationError:
            pass
    update: dict[str, Any] = {name: None for name in _QUESTIONS if not flags.get(name)}
    defaults: dict[str, Any] = {
        "sampling": types.SamplingCapability(),
        "elicitation": types.ElicitationCapability(),
        "roots": types.RootsCapability(),
    }
    for name in _QUESTIONS:
        if flags.get(name) and getattr(capabilities, name) is None:
            update[name] = defaults[name]
    capabilities = capabilities.model_copy(update=update)
    info = fallback
    if isinstance(request.get("clientInfo"), dict):
        try:
            info = types.Implementation.model_validate(request["clientInfo"], by_name=False)
        except ValidationError:
            pass
    return types.InitializeRequestParams(protocol_version=protocol, capabilities=capabilities, client_info=info)


async def clients_protocol(ctx: Any, call_next: Any) -> Any:
    """Server middleware: the request context carries the calling client's protocol version."""
    call = CALL.get()
    protocol = call.request.get("protocol") if call is not None else None
    if isinstance(protocol, str) and protocol != ctx.protocol_version:
        ctx = dataclasses.replace(ctx, protocol_version=protocol)
    return await call_next(ctx)


def _has_back_channel(self: Any) -> bool:
    return False  # every request's questions reach its client through the gateway (see above)


def install(server: Any) -> None:
    """Set the worker's FastMCP server up to show tools the client's request (once per server)."""
    lowlevel = server._mcp_server
    if clients_protocol not in lowlevel.middleware:
        lowlevel.middleware.insert(0, clients_protocol)
    fastmcp_context.Context._is_modern_protocol = _has_back_channel  # type: ignore[method-assign]


def transport_of(request: Mapping[str, Any]) -> Any:
    """What `ctx.transport` says: the client's transport to the gateway (None: REST, the relay socket)."""
    found = request.get("transport")
    return found if found in TRANSPORTS else None
