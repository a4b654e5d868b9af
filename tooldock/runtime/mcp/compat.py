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
as is. Messages the SDK would send on a request's SSE stream besides its response (progress, logging,
server-to-client requests) have no place in a JSON answer and are dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http import check_accept_headers
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from tooldock.runtime.mcp.rules import header

COMPAT_VERSION = "2025-03-26"
COMPAT_VERSIONS = frozenset({"2024-11-05", COMPAT_VERSION})
MAX_BATCH = 100
SDK_ACCEPT = b"application/json, text/event-stream"
INVALID_REQUEST, INTERNAL_ERROR = -32600, -32603
# SDK answers that are about the whole HTTP request, not one message (foreign Origin, unknown session).
WHOLE_REQUEST_STATUSES = frozenset({403, 404})

Handler = Callable[[Scope, Receive, Send], Awaitable[None]]
_UNPARSED = object()
_LINE = re.compile(rb"\r\n|\r|\n")


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


@dataclass
class _Answer:
    """What the SDK sent for one internal request."""

    messages: list[Message]

    @property
    def status(self) -> int:
        return self.messages[0]["status"] if self.messages else 500

    def header(self, name: bytes) -> str | None:
        headers = self.messages[0].get("headers", []) if self.messages else []
        return next((bytes(v).decode("latin-1") for k, v in headers if bytes(k).lower() == name), None)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.response.body")

    @property
    def is_sse(self) -> bool:
        return (self.header(b"content-type") or "").startswith("text/event-stream")

    def json_messages(self) -> list[Any]:
        """The JSON-RPC messages in the answer: every SSE event's data, or the JSON body."""
        if not self.is_sse:
            parsed = _loads(self.body)
            return [] if parsed is _UNPARSED else [parsed]
        events: list[bytes] = []
        data: list[bytes] = []
        for line in [*_LINE.split(self.body), b""]:
            if not line:
                if data:
                    events.append(b"\n".join(data))
                data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
        return [m for m in map(_loads, events) if m is not _UNPARSED]

    def response_to(self, request_id: Any) -> dict[str, Any] | None:
        for message in self.json_messages():
            if (
                isinstance(message, dict)
                and ("result" in message or "error" in message)
                and str(message.get("id")) == str(request_id)
            ):
                return message
        return None

    async def replay(self, send: Send) -> None:
        for message in self.messages:
            await send(message)


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data) if data.strip() else _UNPARSED
    except (ValueError, RecursionError):  # the SDK answers what it cannot parse with its parse error
        return _UNPARSED


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


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


def _valid_id(item: Any) -> Any:
    value = item.get("id") if isinstance(item, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def _invalid(item: Any) -> str | None:
    """Why a batch element is not a JSON-RPC message at all (the SDK validates the rest)."""
    if not isinstance(item, dict):
        return "Invalid Request: a batch element must be a JSON-RPC message object"
    if item.get("jsonrpc") != "2.0":
        return 'Invalid Request: "jsonrpc" must be "2.0"'
    if "id" in item and _valid_id(item) is None:
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


async def _call(handler: Handler, scope: Scope, body: bytes, session: str | None, client: _Client) -> _Answer:
    """One message through the SDK, as a request it accepts; its answer captured, not sent."""
    dropped = (b"accept", b"content-length", b"mcp-session-id")
    headers = [(k, v) for k, v in scope["headers"] if k not in dropped]
    headers += [(b"accept", SDK_ACCEPT), (b"content-length", str(len(body)).encode())]
    if session:
        headers.append((b"mcp-session-id", session.encode("latin-1")))
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await client.receive()  # after the body: waits until the client disconnects

    messages: list[Message] = []

    async def capture(message: Message) -> None:
        messages.append(message)

    await handler({**scope, "headers": headers}, receive, capture)
    return _Answer(messages)


async def _single(handler: Handler, scope: Scope, body: bytes, send: Send, client: _Client) -> None:
    """A json-only compat POST of one message (or of a body that does not parse: the SDK says why)."""
    answer = await _call(handler, scope, body, header(scope, b"mcp-session-id"), client)
    if not answer.is_sse:  # 202 for a notification, or an error: already what the client should see
        await answer.replay(send)
        return
    request_id = _valid_id(_loads(body))
    response = answer.response_to(request_id)
    status = 200
    if response is None:
        status, response = 500, _error(request_id, INTERNAL_ERROR, "the request ended without a response")
    await _respond(send, status, response, answer.header(b"mcp-session-id"))


async def _batch(handler: Handler, scope: Scope, batch: list[Any], send: Send, client: _Client) -> None:
    if not batch:
        await _respond(send, 400, _error(None, INVALID_REQUEST, "Invalid Request: empty batch"), None)
        return
    if len(batch) > MAX_BATCH:
        message = f"Invalid Request: a batch may hold at most {MAX_BATCH} messages, this one has {len(batch)}"
        await _respond(send, 400, _error(None, INVALID_REQUEST, message), None)
        return
    session = header(scope, b"mcp-session-id")
    results: list[dict[str, Any]] = []
    first = True
    for item in batch:
        problem = _invalid(item)
        if problem is not None:
            results.append(_error(_valid_id(item), INVALID_REQUEST, problem))
            continue
        answer = await _call(handler, scope, json.dumps(item).encode(), session, client)
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
            results.append(response or _error(item["id"], INTERNAL_ERROR, "the request ended without a response"))
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
    payload = _loads(bytes(body.data))
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
