"""An upstream server's questions to its client (sampling, elicitation, roots), put to the MCP client whose
call asked them, through that call's relay (the same relay a Context tool's questions take: over the
caller's session for a 2025-era client, as `input_required` rounds for a 2026-07-28 one).

A server asks in one of two ways:
- a 2026-07-28 server answers `tools/call` with an `input_required` result. `drive` puts each of its input
  requests to the caller of that very call and sends the call again with the answers and the server's
  `requestState`, as the SDK client's own driver does (`mcp.Client.call_tool`), for up to MAX_ROUNDS.
- an older server sends `sampling/createMessage` or `elicitation/create` in the middle of the call. Over
  stdio nothing links that request to the call, so `refusal` lets it through only when exactly one call
  is in flight on the server, and that call came from an MCP client that declared the capability: a
  question is never shown to a client whose call did not ask it. Roots are not declared to servers for
  this way (connection.py): a server keeps the roots it is given for its whole session, and one session
  serves every caller.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from tooldock.errors import UpstreamError

# The capability a caller must have declared for each question a server may put to it.
CAPABILITIES = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
MAX_ROUNDS = 10  # input_required rounds of one call (the SDK client's own default)
INPUT_REQUIRED = "input_required"

Send = Callable[[dict[str, Any] | None, str | None], Awaitable[dict[str, Any]]]


def refusal(relay: Any, method: str) -> str | None:
    """Why this call's client cannot be asked `method` (None: it can)."""
    if method not in CAPABILITIES:
        return f"a server may not ask its client for {method!r} through ToolDock"
    if relay is None:
        return "the call came over REST, or over the relay socket without _meta.tooldock/capabilities: no client to ask"
    capability = CAPABILITIES[method]
    if not relay.call_fields().get("client", {}).get(capability, False):
        return f"the calling client did not declare the {capability} capability"
    return None


def refusal_mid_call(calls: list[Any], method: str) -> str | None:
    """Why a request a server sent mid-call cannot go to a caller (None: to the one call in flight)."""
    if not calls:
        return "no call is in flight on this server (questions are relayed only to the client of a running call)"
    if len(calls) > 1:
        return (
            f"{len(calls)} requests are in flight on this server and its question carries no request id, so "
            "the caller it belongs to is not known"
        )
    return refusal(calls[0], method)


async def put(relay: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The caller's answer to the question (its MCPError when it refuses: relayed as the server's answer)."""
    answer = await relay.handle({"op": "ask", "method": method, "params": params})
    return dict(answer or {})


async def drive(send: Send, relay: Any, server: str) -> dict[str, Any]:
    """A tools/call, prompts/get or resources/read whose server may answer `input_required`: each round's
    questions put to the caller, the request sent again with the answers, until a final result
    (UpstreamError when a question is refused)."""
    result = await send(None, None)
    for _ in range(MAX_ROUNDS):
        if result.get("resultType") != INPUT_REQUIRED:
            return result
        answers: dict[str, Any] = {}
        for key, request in (result.get("inputRequests") or {}).items():
            method, params = str(request.get("method")), request.get("params") or {}
            why = refusal(relay, method)
            if why is not None:
                print(f"tooldock: upstream {server}: refused its {method} request: {why}", file=sys.stderr, flush=True)
                raise _refused(server, method, why)
            try:
                answers[key] = await put(relay, method, params)
            except MCPError as err:
                detail = {"rpc_code": err.error.code, "rpc_message": err.error.message, "rpc_data": err.error.data}
                raise UpstreamError(err.error.message, detail) from None
        result = await send(answers, result.get("requestState"))
    if result.get("resultType") != INPUT_REQUIRED:
        return result
    message = f"upstream server {server} still asked for input after {MAX_ROUNDS} rounds"
    raise UpstreamError(message, {"rpc_code": types.INTERNAL_ERROR, "rpc_message": message})


def _refused(server: str, method: str, why: str) -> UpstreamError:
    message = f"ToolDock refused the {method} request of upstream server {server}: {why}"
    return UpstreamError(message, {"rpc_code": types.INVALID_REQUEST, "rpc_message": message})
