"""The questions a tool may put to its caller (MCP's server-to-client requests): their request and result
models, and the client capability each needs. Shared by the MCP front end (mcp/relay.py, the lean stream)
and the relay socket (relay/asks.py), and by `tooldock relay`, which passes the socket's questions on to its
own MCP client.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

# What a worker may ask the client: the request model and the result model for each method.
ASKS: dict[str, tuple[Any, Any]] = {
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}
# The capability a client declares for each of those questions.
CAPABILITIES = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def declared(caps: Any) -> dict[str, bool]:
    """Which of sampling, elicitation and roots a client's capabilities (None: none) declare."""
    return {name: caps is not None and getattr(caps, name, None) is not None for name in CAPABILITIES.values()}


def undeclared(method: str) -> MCPError:
    """The refusal of a guard's question the client did not declare the capability for."""
    return MCPError(types.INVALID_REQUEST, f"the tool asked this client for {method!r}, which it did not declare")


def unmet(have: dict[str, bool], requests: dict[str, Any]) -> MCPError | None:
    """MCP's -32021 MissingRequiredClientCapability for the capabilities `requests` (an `inputRequests`
    mapping) need that `have` (from `declared`) lacks, naming them in `requiredCapabilities`; None when the
    client declared them all."""
    methods = {str(r.get("method")) for r in requests.values() if isinstance(r, dict)}
    missing = sorted({CAPABILITIES[m] for m in methods if m in CAPABILITIES and not have.get(CAPABILITIES[m])})
    if not missing:
        return None
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"the client did not declare the {' and '.join(missing)} capability this request asks for",
        {"requiredCapabilities": {name: {} for name in missing}},
    )


def models(method: str, params: dict[str, Any]) -> tuple[Any, Any]:
    if method not in ASKS:
        raise LookupError(f"a tool may not ask the client for {method!r}")
    request_model, result_model = ASKS[method]
    if method == "sampling/createMessage" and params.get("tools"):
        result_model = types.CreateMessageResultWithTools  # a request that offered tools may get tool use back
    return request_model, result_model


def question(method: str, params: dict[str, Any]) -> tuple[Any, Any]:
    """A worker's question as the SDK's request model, and the model its answer must fit (LookupError: not a
    question a tool may ask). McpRelay's and the lean stream's (leanstream.py)."""
    request_model, result_model = models(method, params)
    return request_model.model_validate({"method": method, **({"params": params} if params else {})}), result_model


async def ask_session(ctx: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Put a tool's question to the MCP client of the request `ctx` serves, as a request related to it; the
    answer checked by the SDK against the result model (McpRelay's, and `tooldock relay`'s for its client)."""
    request, result_model = question(method, params)
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
    return dump(await ctx.session.send_request(request, result_model, metadata=metadata))
