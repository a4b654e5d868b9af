"""The 2025-03-26 POST rules of seed 000 ("Streamable HTTP behavior", "Protocol version handling") in front
of the SDK: `Accept: application/json` alone, and JSON-RPC batch arrays.

Why this is hand-written: the SDK's streamable HTTP transport has one set of POST rules for every
handshake-era version. It answers 406 unless Accept names both application/json and text/event-stream,
and 400 to a JSON array (it validates the body as exactly one JSON-RPC message). Its only JSON-answer mode
(`json_response=True`) is a setting of the whole session manager, not per request or per version, and it
has no batch support at all. 2025-03-26 clients may do both, so this adapter turns such a POST into what
the SDK does accept: one internal request per message, with Accept rewritten to
"application/json, text/event-stream" and that message alone as the body, then reads the SDK's answer
(an SSE stream, read to its end; or a plain JSON/202/error answer) and writes `application/json` back.

Which version's rules apply: the `MCP-Protocol-Version` header if sent; else, for an `initialize` request,
its `params.protocolVersion`; else (no header, no session version we could know without parsing every
answer) 2025-03-26 compatibility. Only 2025-03-26 (and 2024-11-05, which had no streamable HTTP of its own)
get the lenient rules; 2025-06-18 and 2025-11-25 keep the SDK's answers (406 for a json-only Accept, 400
for a batch), and 2026-07-28 (the SDK's stateless per-request mode) is never touched.

Everything else goes to the SDK unchanged. The fast path reads nothing: a GET/DELETE, a POST with a
non-compat version header, or an Accept without application/json. A compat POST that accepts both types
only has its first non-whitespace byte peeked (a `[` means a batch); what was read is replayed to the SDK.

Inside a batch the messages run one after another, in order, so an `initialize` early in the batch issues
the `Mcp-Session-Id` that the later messages (and the client's response headers) carry. An SDK error
answer for one message becomes a JSON-RPC error object for that message's id, except a 403/404 (foreign
Origin, unknown session) for the batch's first message, which holds for all of them and is passed through
as is. Messages the SDK would send on a request's SSE stream besides its response have no place in a JSON
answer: progress and log messages are dropped, and the server's requests to the client (a Context tool's
sampling, elicitation or roots) are refused at once in the client's name (sdkcall.py), so the tool does not
wait for its timeout. The step through the SDK itself is in sdkcall.py.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.streamable_http import check_accept_headers
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from tooldock.runtime.mcp.rules import header
from tooldock.runtime.mcp.sdkcall import INTERNAL_ERROR, INVALID_REQUEST, Handler, call, loads, rpc_error, valid_id

COMPAT_VERSION = "2025-03-26"
COMPAT_VERSIONS = frozenset({"2024-11-05", COMPAT_VERSION})
MAX_BATCH = 100
# SDK answers that are about the whole HTTP request, not one message (foreign Origin, unknown session).
WHOLE_REQUEST_STATUSES = frozenset({403, 404})


class Body:
    """The request body read so far, replayable to the SDK as if it had not been read."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.data = bytearray()
        self.complete = False
        self.disconnected = False

    async def pull(self) -> bool:
        """Read one more ASGI message; False once there is nothing more to read."""
        if self.complete or self.disconnected:
            return False
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self.disconnected = True
            return False
        self.data += message.get("body", b"")
        self.complete = not message.get("more_body", False)
        return True

    def replay(self) -> Receive:
        pending = [{"type": "http.request", "body": bytes(self.data), "more_body": not self.complete}]

        async def receive() -> Message:
            if pending:
                return pending.pop()
            if self.disconnected:
                return {"type": "http.disconnect"}
            return await self._receive()

        return receive


async def _respond(send: Send, status: int, payload: Any, session: str | None) -> None:
    body = b"" if payload is None else json.dumps(payload, separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    if payload is not None:
        headers.append((b"content-type", b"application/json"))
    if session:
        headers.append((b"mcp-session-id", session.encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _initialize_version(payload: Any) -> str | None:
    """`params.protocolVersion` of the (first) initialize request in a message or batch."""
    for item in payload if isinstance(payload, list) else [payload]:
        if isinstance(item, dict) and item.get("method") == "initialize":
            params = item.get("params")
            version = params.get("protocolVersion") if isinstance(params, dict) else None
            return version if isinstance(version, str) else None
    return None


def _invalid(item: Any) -> str | None:
    """Why a batch element is not a JSON-RPC message at all (the SDK validates the rest)."""
    if not isinstance(item, dict):
        return "Invalid Request: a batch element must be a JSON-RPC message object"
    if item.get("jsonrpc") != "2.0":
        return 'Invalid Request: "jsonrpc" must be "2.0"'
    if "id" in item and valid_id(item) is None:
        return 'Invalid Request: "id" must be a string or an integer'
    if "method" in item:
        return None if isinstance(item["method"], str) else 'Invalid Request: "method" must be a string'
    if "result" in item or "error" in item:
        return None
    return 'Invalid Request: a message needs a "method" (or a "result"/"error" with an "id")'


class _Client:
    """The outer request's receive, noting when the client goes away."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.gone = False

    async def receive(self) -> Message:
        if self.gone:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self.gone = True
        return message


async def _single(handler: Handler, scope: Scope, body: bytes, send: Send, client: _Client) -> None:
    """A json-only compat POST of one message (or of a body that does not parse: the SDK says why)."""
    answer = await call(handler, scope, body, header(scope, b"mcp-session-id"), client.receive)
    if not answer.is_sse:  # 202 for a notification, or an error: already what the client should see
        await answer.replay(send)
        return
    request_id = valid_id(loads(body))
    response = answer.response_to(request_id)
    status = 200
    if response is None:
        status, response = 500, rpc_error(request_id, INTERNAL_ERROR, "the request ended without a response")
    await _respond(send, status, response, answer.header(b"mcp-session-id"))


async def _batch(handler: Handler, scope: Scope, batch: list[Any], send: Send, client: _Client) -> None:
    if not batch:
        await _respond(send, 400, rpc_error(None, INVALID_REQUEST, "Invalid Request: empty batch"), None)
        return
    if len(batch) > MAX_BATCH:
        message = f"Invalid Request: a batch may hold at most {MAX_BATCH} messages, this one has {len(batch)}"
        await _respond(send, 400, rpc_error(None, INVALID_REQUEST, message), None)
        return
    session = header(scope, b"mcp-session-id")
    results: list[dict[str, Any]] = []
    first = True
    for item in batch:
        problem = _invalid(item)
        if problem is not None:
            results.append(rpc_error(valid_id(item), INVALID_REQUEST, problem))
            continue
        answer = await call(handler, scope, json.dumps(item).encode(), session, client.receive)
        if client.gone:
            return
        if first and answer.status in WHOLE_REQUEST_STATUSES:
            await answer.replay(send)
            return
        first = False
        session = answer.header(b"mcp-session-id") or session
        is_request = "method" in item and "id" in item
        if answer.status == 202:
            continue
        if answer.status >= 400:
            found = answer.json_messages()
            error = found[0].get("error") if found and isinstance(found[0], dict) else None
            if not isinstance(error, dict):
                error = {"code": INTERNAL_ERROR, "message": f"HTTP {answer.status}: {answer.body[:200]!r}"}
            results.append({"jsonrpc": "2.0", "id": item["id"] if is_request else None, "error": error})
        elif is_request:
            response = answer.response_to(item["id"])
            results.append(response or rpc_error(item["id"], INTERNAL_ERROR, "the request ended without a response"))
    if results:
        await _respond(send, 200, results, session)
    else:
        await _respond(send, 202, None, session)


async def serve(handler: Handler, scope: Scope, receive: Receive, send: Send, max_body: int) -> None:
    """Serve one `/mcp` request: through this adapter if 2025-03-26 rules need it, else `handler` as is."""
    version = header(scope, b"mcp-protocol-version")
    if scope["method"] != "POST" or (version is not None and version not in COMPAT_VERSIONS):
        await handler(scope, receive, send)
        return
    has_json, has_sse = check_accept_headers(Request(scope))
    declared = header(scope, b"content-length") or ""
    if not has_json or (declared.isdigit() and int(declared) > max_body):
        await handler(scope, receive, send)  # 406 / 413: the SDK's own answers
        return
    body = Body(receive)
    if has_sse:  # acceptable as is to every version: only a batch needs this adapter
        while not body.data.lstrip() and len(body.data) <= max_body and await body.pull():
            pass
        if not body.data.lstrip().startswith(b"["):
            await handler(scope, body.replay(), send)
            return
    while len(body.data) <= max_body and await body.pull():
        pass
    if body.disconnected:
        return
    if not body.complete:  # over the limit: the SDK reads the rest and answers 413
        await handler(scope, body.replay(), send)
        return
    payload = loads(bytes(body.data))
    if version is None:
        version = _initialize_version(payload) or COMPAT_VERSION
    if version not in COMPAT_VERSIONS:  # an initialize for 2025-06-18+: the SDK's rules (406, 400)
        await handler(scope, body.replay(), send)
        return
    client = _Client(receive)
    if isinstance(payload, list):
        await _batch(handler, scope, payload, send, client)
    elif has_sse:  # began with "[" but did not parse: the SDK's parse error
        await handler(scope, body.replay(), send)
    else:
        await _single(handler, scope, bytes(body.data), send, client)
