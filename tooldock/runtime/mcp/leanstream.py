"""The lean path's stream (lean.py): a `tools/call` of a Context tool answered as the SDK would answer it,
one SSE stream carrying the call's progress and log notifications and then its response, without the
SDK's per-message machinery.

The stream is the SDK transport's own, byte for byte in what a client reads: the same headers, a priming
event (2025-11-25 sessions: its id and the `retry:` interval), `event: message` events with ids from the
session's event store, so a client that lost the stream resumes it with `Last-Event-ID` exactly as from
an SDK stream (the SDK's GET replays what is stored here), and a comment every 15 seconds while nothing
else is sent (what sse-starlette sends, so proxies keep the stream open).

`StreamRelay` is the gateway end of the Context tool (what `relay.McpRelay` is on the SDK path): progress
on the caller's token, log messages at or above the session's `logging/setLevel`, and the tool's questions
(sampling, elicitation, roots, as far as the client declared them) sent on the stream as requests, whose
answers the client POSTs back (`Asks`), as the SDK would send them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from starlette.types import Send

from tooldock.runtime.mcp.events import SessionEvents
from tooldock.runtime.mcp.scope import scope_of
from tooldock.runtime.mcp.session import SessionState
from tooldock.runtime.mcp.sharedevents import SharedEvents
from tooldock.runtime.questions import CAPABILITIES, declared, question, undeclared
from tooldock.worker.protocol import LIST_CHANGED, shown_level

HEADERS = [
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"text/event-stream"),
    (b"x-accel-buffering", b"no"),
]
PING_SECONDS = 15.0  # sse-starlette's default: a comment while the stream is otherwise quiet
PRIMING_SINCE = "2025-11-25"  # older clients cannot parse the empty-data priming event (the SDK's rule)

# Compact JSON, built once (`json.dumps` with options builds an encoder per call); lean.py's answers too.
COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


class SseAnswer:
    """One POST's SSE answer: `open`, then `message` per JSON-RPC message, the response with `last=True`."""

    def __init__(self, send: Send, session_header: tuple[bytes, bytes], transport: Any, request_id: Any) -> None:
        self._send, self._session_header = send, session_header
        events = getattr(transport, "_event_store", None)
        self._events = events if isinstance(events, SessionEvents | SharedEvents) else None
        self._retry = getattr(transport, "_retry_interval", None)
        self._stream = str(request_id)  # the SDK's stream key for a POST's answer: the request's id
        self._lock = asyncio.Lock()
        self._pinger: asyncio.Task[None] | None = None

    async def open(self, protocol: str) -> None:
        frame = b""
        if self._events is not None and protocol >= PRIMING_SINCE:  # ISO dates compare as strings
            event_id = await self._events.store_raw(self._stream, None)
            retry = f"retry: {self._retry}\r\n" if self._retry is not None else ""
            frame = f"id: {event_id}\r\ndata: \r\n{retry}\r\n".encode()
        await self._send({"type": "http.response.start", "status": 200, "headers": [*HEADERS, self._session_header]})
        await self._write(frame)
        self._pinger = asyncio.ensure_future(self._ping())

    async def message(self, payload: dict[str, Any], last: bool = False) -> None:
        """Send one message (stored first, under its event id); `last`: and end the stream with it."""
        data = COMPACT.encode(payload)
        head = ""
        if self._events is not None:
            head = f"id: {await self._events.store_raw(self._stream, data.encode())}\r\n"
        frame = f"{head}event: message\r\ndata: {data}\r\n\r\n".encode()
        if not last:
            await self._write(frame)
            return
        self.abandon()
        async with self._lock:  # the response and the stream's end in one write
            await self._send({"type": "http.response.body", "body": frame, "more_body": False})

    def abandon(self) -> None:
        """Stop the pings of a stream that will not be closed (the gateway is stopping)."""
        if self._pinger is not None:
            self._pinger.cancel()

    async def _write(self, frame: bytes) -> None:
        async with self._lock:  # a ping never lands inside a message
            await self._send({"type": "http.response.body", "body": frame, "more_body": True})

    async def _ping(self) -> None:
        with contextlib.suppress(Exception):  # the client went away: uvicorn drops the writes anyway
            while True:
                await asyncio.sleep(PING_SECONDS)
                await self._write(b": ping\r\n\r\n")


class Asks:
    """The lean streams' questions to their clients, by (session, JSON-RPC id), until the client POSTs the
    answer (lean.py hands such a response here instead of to the SDK)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], asyncio.Future[dict[str, Any]]] = {}

    def expect(self, session: str, request_id: str) -> asyncio.Future[dict[str, Any]]:
        future = self._waiting[(session, request_id)] = asyncio.get_running_loop().create_future()
        return future

    def forget(self, session: str, request_id: str) -> None:
        future = self._waiting.pop((session, request_id), None)
        if future is not None and not future.done():
            future.cancel()  # the call is over: its question waits no longer

    def answered(self, session: str, message: dict[str, Any]) -> bool:
        """Take the client's response if it answers one of these questions."""
        rid = message.get("id")
        future = self._waiting.get((session, rid)) if isinstance(rid, str) else None
        if future is None:
            return False
        if not future.done():
            future.set_result(message)
        return True


class StreamRelay:
    """What the worker sends during a lean streaming call, as messages on the call's stream: progress and
    log notifications, and its questions (sampling, elicitation, roots) as requests to the client, whose
    answers come back in POSTs of their own (string ids, never the SDK session's integer ones)."""

    def __init__(
        self, answer: SseAnswer, params: dict[str, Any], state: SessionState, caps: Any, asks: Asks, session: str
    ) -> None:
        self.answer, self.asks, self.session = answer, asks, session
        self.log_level, self.state = state.log_level, state  # its rules and values: visibility.py, session.py
        meta = params.get("_meta")
        self.token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.client = declared(caps)
        self.session_key: Any = None  # whose view an upstream namespace's call sees (lean.py sets it)
        self.request: dict[str, Any] = {}  # what the tool reads of its request (callcontext.py; lean.py sets it)
        self._open: set[str] = set()  # questions not answered yet

    def close(self) -> None:
        """The call is over: questions still open are dropped (a late answer goes to the SDK, which ignores it)."""
        for rid in list(self._open):
            self.asks.forget(self.session, rid)

    def call_fields(self) -> dict[str, Any]:
        return {
            "client": dict(self.client),
            "progress": self.token is not None,
            "logLevel": self.log_level,
            "scope": scope_of(self.session),  # whose `ctx.set_state()` the call's is (scope.py)
            **self.state.fields(),  # its visibility rules and values (session.py)
            "request": self.request,
        }

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("op") != "event":
            return await self.ask(str(message.get("method")), message.get("params") or {})
        data = message.get("data") or {}
        if message.get("event") == "progress" and self.token is not None:
            params = {"progressToken": self.token, "progress": float(data.get("progress") or 0)}
            if data.get("total") is not None:
                params["total"] = float(data["total"])
            if data.get("message") is not None:
                params["message"] = str(data["message"])
            await self.answer.message({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        elif message.get("event") == "log" and (level := shown_level(data, self.log_level)) is not None:
            params = {"level": level}
            for name in ("logger", "data"):
                if data.get(name) is not None:
                    params[name] = data[name]
            await self.answer.message({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        elif message.get("event") == "visibility":
            self.state.visibility.keep(data)
            self.state.changed()
        elif message.get("event") == "state":
            self.state.values.keep(data)
            self.state.changed()
        elif message.get("event") == "changed" and str(data.get("method")) in LIST_CHANGED:
            await self.answer.message({"jsonrpc": "2.0", "method": str(data["method"])})
        return None

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A question to the client, validated both ways with the SDK's models (as `McpRelay` asks it)."""
        request, result_model = question(method, params)
        rid = f"tooldock-{secrets.token_hex(8)}"
        future = self.asks.expect(self.session, rid)
        self._open.add(rid)
        try:
            await self.answer.message(
                {"jsonrpc": "2.0", "id": rid, **request.model_dump(by_alias=True, mode="json", exclude_none=True)}
            )
            reply = await future
        finally:
            self._open.discard(rid)
            self.asks.forget(self.session, rid)
        error = reply.get("error")
        if error is not None:
            error = error if isinstance(error, dict) else {}
            code = error.get("code")
            code = code if isinstance(code, int) and not isinstance(code, bool) else types.INTERNAL_ERROR
            raise MCPError(code, str(error.get("message") or "the client refused"), error.get("data"))
        result = result_model.model_validate(reply.get("result") or {}, by_name=False)
        return dict(result.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def ask_declared(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A guard's question (inputreq.legacy_rounds): refused when the client did not declare it, as
        `relay.ask_client` refuses it on the SDK path."""
        if not self.client.get(CAPABILITIES.get(method, ""), False):
            raise undeclared(method)
        return await self.ask(method, params)
