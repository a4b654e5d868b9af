"""What of an MCP request a Context tool sees in the worker: the worker protocol's `request` field.

FastMCP hands a tool the request it serves: `ctx.request_context.meta` (the request's whole `_meta`, custom
keys and a 2026-07-28 request's `io.modelcontextprotocol/clientCapabilities` included, and `ctx.client_id`
read from it), `ctx.request_id` (the JSON-RPC id), `ctx.request_context.protocol_version`, and the client's
`clientInfo` and capabilities (`ctx.session.client_params`). The worker runs each call on a connection of
its own (worker/direct.py), so the gateway sends these along with the call, from whichever front end served
the request (the SDK's path, the lean path's stream, a task, legacy SSE, the relay socket), and the worker
builds the tool's request context from them (worker/callcontext.py).

The session id is not among them: the worker gets the session's opaque scope instead (scope.py), which is
what `ctx.session_id` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _dumped(model: Any) -> dict[str, Any] | None:
    if model is None:
        return None
    if isinstance(model, Mapping):
        return dict(model)
    dump = getattr(model, "model_dump", None)
    return dict(dump(by_alias=True, mode="json", exclude_none=True)) if dump is not None else None


def request_fields(
    request_id: Any, meta: Any, protocol: str | None, client_params: Any = None, transport: str | None = None
) -> dict[str, Any]:
    """The `request` field of a worker call: the JSON-RPC id, the request's `_meta` as the client sent it
    (camelCase keys), the protocol version, the client's info and capabilities (an `InitializeRequestParams`
    or its JSON), and the transport FastMCP would name (`streamable-http`, `sse`)."""
    fields: dict[str, Any] = {}
    if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
        fields["id"] = request_id
    if isinstance(meta, Mapping) and meta:
        fields["meta"] = dict(meta)
    if isinstance(protocol, str):
        fields["protocol"] = protocol
    params = _dumped(client_params)
    if params:
        if isinstance(params.get("clientInfo"), dict):
            fields["clientInfo"] = params["clientInfo"]
        if isinstance(params.get("capabilities"), dict):
            fields["capabilities"] = params["capabilities"]
    if transport is not None:
        fields["transport"] = transport
    return fields


def of_sdk_request(ctx: Any) -> dict[str, Any]:
    """The `request` field for a request the SDK serves (its `ServerRequestContext`): streamable HTTP, legacy
    SSE (a `POST /messages`), a 2026-07-28 request (its client's info and capabilities come from its `_meta`)."""
    params = getattr(ctx, "params", None)
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    request = getattr(ctx, "request", None)
    path = str(getattr(getattr(request, "url", None), "path", "") or "")
    transport = None if request is None else "sse" if path.endswith("/messages") else "streamable-http"
    session = getattr(ctx, "session", None)
    return request_fields(
        getattr(ctx, "request_id", None),
        meta,
        getattr(ctx, "protocol_version", None),
        getattr(session, "client_params", None),
        transport,
    )
