"""One JSON-RPC message through the SDK's streamable HTTP handler as an internal request it accepts (the
2025-03-26 adapter's step, compat.py): its answer captured, not sent, and read back as JSON-RPC messages.

The answer may be an SSE stream with the server's requests on it (a Context tool asking for sampling,
elicitation or roots). The adapter's client accepts only JSON, so it can never see them: each is refused
at once in the client's name (`_Asked`), or the tool would wait for its timeout.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import Message, Receive, Scope, Send

SDK_ACCEPT = b"application/json, text/event-stream"
INVALID_REQUEST, INTERNAL_ERROR = -32600, -32603

Handler = Callable[[Scope, Receive, Send], Awaitable[None]]
_UNPARSED = object()
_LINE = re.compile(rb"\r\n|\r|\n")
# The blank line that ends an SSE event: two line ends (CRLF, CR or LF, mixed too), a CRLF never split in two.
_EOL = rb"(?:\r\n|\r(?!\n)|\n)"
_EVENT_END = re.compile(_EOL + _EOL)


@dataclass
class Answer:
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
            parsed = loads(self.body)
            return [] if parsed is _UNPARSED else [parsed]
        return [m for m in map(event_data, _EVENT_END.split(self.body)) if m is not _UNPARSED]

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


def event_data(event: bytes) -> Any:
    """The JSON in one SSE event's `data:` lines (joined by newlines, one leading space dropped), or
    _UNPARSED (a comment, an event with no data, or data that is not JSON)."""
    return loads(b"\n".join(line[5:].removeprefix(b" ") for line in _LINE.split(event) if line.startswith(b"data:")))


def loads(data: bytes) -> Any:
    try:
        return json.loads(data) if data.strip() else _UNPARSED
    except (ValueError, RecursionError):  # the SDK answers what it cannot parse with its parse error
        return _UNPARSED


def rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def valid_id(item: Any) -> Any:
    value = item.get("id") if isinstance(item, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


async def call(handler: Handler, scope: Scope, body: bytes, session: str | None, client: Receive) -> Answer:
    """One message through the SDK, as a request it accepts; its answer captured, not sent. After the body,
    its receive waits for the outer client to disconnect."""
    messages: list[Message] = []
    asked = _Asked(handler, scope, session)

    async def capture(message: Message) -> None:
        messages.append(message)
        if message["type"] == "http.response.body":
            asked.feed(message.get("body", b""))

    try:
        await handler(_internal(scope, body, session), _body_then(body, client), capture)
    finally:
        await asked.close()
    return Answer(messages)


def _body_then(body: bytes, then: Receive) -> Receive:
    """A receive that gives `body` as the whole request, then what `then` gives."""
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await then()

    return receive


async def _disconnected() -> Message:
    return {"type": "http.disconnect"}


def _internal(scope: Scope, body: bytes, session: str | None) -> Scope:
    """The scope of an internal request to the SDK: `body` as one message, with an Accept it takes."""
    dropped = (b"accept", b"content-length", b"mcp-session-id")
    headers = [(k, v) for k, v in scope["headers"] if k not in dropped]
    headers += [(b"accept", SDK_ACCEPT), (b"content-length", str(len(body)).encode())]
    if session:
        headers.append((b"mcp-session-id", session.encode("latin-1")))
    return {**scope, "headers": headers}


class _Asked:
    """The server's requests on an internal request's SSE stream (a Context tool asking for sampling,
    elicitation or roots): a json-only client can never see them, so each is refused at once in its name,
    with a JSON-RPC error POSTed back to the SDK as the client's answer; the tool then fails (or carries
    on) instead of waiting for its timeout."""

    def __init__(self, handler: Handler, scope: Scope, session: str | None) -> None:
        self.handler, self.scope, self.session = handler, scope, session
        self._pending = b""
        self._answers: set[asyncio.Task[None]] = set()

    def feed(self, chunk: bytes) -> None:
        if not self.session:  # no session, no request the server could make
            return
        *events, self._pending = _EVENT_END.split(self._pending + chunk)
        for message in map(event_data, events):
            if isinstance(message, dict) and isinstance(message.get("method"), str) and valid_id(message) is not None:
                task = asyncio.ensure_future(self._refuse(message["id"], message["method"]))
                self._answers.add(task)
                task.add_done_callback(self._answers.discard)

    async def _refuse(self, request_id: Any, method: str) -> None:
        reason = (
            f"the client cannot be sent {method} during this call: its POST accepts only application/json, "
            "which carries the response and nothing before it (accept text/event-stream too to be asked)"
        )
        body = json.dumps(rpc_error(request_id, INVALID_REQUEST, reason)).encode()

        async def ignore(message: Message) -> None:  # the SDK's 202
            pass

        await self.handler(_internal(self.scope, body, self.session), _body_then(body, _disconnected), ignore)

    async def close(self) -> None:
        if self._answers:
            await asyncio.gather(*self._answers, return_exceptions=True)
