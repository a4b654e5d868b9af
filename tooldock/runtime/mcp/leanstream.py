"""The lean path's stream (lean.py): a `tools/call` of a Context tool answered as the SDK would answer it,
one SSE stream carrying the call's progress and log notifications and then its response, without the
SDK's per-message machinery.

The stream is the SDK transport's own, byte for byte in what a client reads: the same headers, a priming
event (2025-11-25 sessions: its id and the `retry:` interval), `event: message` events with ids from the
session's event store, so a client that lost the stream resumes it with `Last-Event-ID` exactly as from
an SDK stream (the SDK's GET replays what is stored here), and a comment every 15 seconds while nothing
else is sent (what sse-starlette sends, so proxies keep the stream open).

`StreamRelay` is the gateway end of the Context tool (what `relay.McpRelay` is on the SDK path): progress
on the caller's token, log messages at or above the session's `logging/setLevel`. The lean path takes only
sessions whose client declared none of sampling, elicitation and roots, so the tool is never offered a
way to ask the client anything (as on the SDK path for such a client).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from starlette.types import Send

from tooldock.runtime.mcp.events import SessionEvents
from tooldock.runtime.mcp.relay import LOG_LEVELS

HEADERS = [
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"content-type", b"text/event-stream"),
    (b"x-accel-buffering", b"no"),
]
PING_SECONDS = 15.0  # sse-starlette's default: a comment while the stream is otherwise quiet
PRIMING_SINCE = "2025-11-25"  # older clients cannot parse the empty-data priming event (the SDK's rule)


class SseAnswer:
    """One POST's SSE answer: `open`, then `message` per JSON-RPC message, then `close`."""

    def __init__(self, send: Send, session_header: tuple[bytes, bytes], transport: Any, request_id: Any) -> None:
        self._send, self._session_header = send, session_header
        events = getattr(transport, "_event_store", None)
        self._events = events if isinstance(events, SessionEvents) else None
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

    async def message(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        head = ""
        if self._events is not None:
            head = f"id: {await self._events.store_raw(self._stream, data.encode())}\r\n"
        await self._write(f"{head}event: message\r\ndata: {data}\r\n\r\n".encode())

    def abandon(self) -> None:
        """Stop the pings of a stream that will not be closed (the gateway is stopping)."""
        if self._pinger is not None:
            self._pinger.cancel()

    async def close(self) -> None:
        self.abandon()
        async with self._lock:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _write(self, frame: bytes) -> None:
        async with self._lock:  # a ping never lands inside a message
            await self._send({"type": "http.response.body", "body": frame, "more_body": True})

    async def _ping(self) -> None:
        with contextlib.suppress(Exception):  # the client went away: uvicorn drops the writes anyway
            while True:
                await asyncio.sleep(PING_SECONDS)
                await self._write(b": ping\r\n\r\n")


class StreamRelay:
    """What the worker sends during a lean streaming call, as notifications on the call's stream."""

    def __init__(self, answer: SseAnswer, params: dict[str, Any], log_level: str | None) -> None:
        self.answer, self.log_level = answer, log_level
        meta = params.get("_meta")
        self.token = meta.get("progressToken") if isinstance(meta, dict) else None

    def call_fields(self) -> dict[str, Any]:
        return {
            "client": {"sampling": False, "elicitation": False, "roots": False},
            "progress": self.token is not None,
            "logLevel": self.log_level,
        }

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("op") != "event":  # never offered, so never asked; answered as a refusal if it is
            raise LookupError("this call cannot ask the client anything")
        data = message.get("data") or {}
        if message.get("event") == "progress" and self.token is not None:
            params = {"progressToken": self.token, "progress": float(data.get("progress") or 0)}
            if data.get("total") is not None:
                params["total"] = float(data["total"])
            if data.get("message") is not None:
                params["message"] = str(data["message"])
            await self.answer.message({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        elif message.get("event") == "log":
            level = data.get("level") if data.get("level") in LOG_LEVELS else "info"
            if self.log_level and LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
                return None
            params = {"level": level}
            for name in ("logger", "data"):
                if data.get(name) is not None:
                    params[name] = data[name]
            await self.answer.message({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        return None
