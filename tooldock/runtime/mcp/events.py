"""Resumable SSE for MCP streamable HTTP (seed 000, "SSE + resumability"): a bounded in-memory event
store, and a session manager that gives every session its own view of it.

The SDK's transport stores every message it sends on an SSE stream (a POST's response stream, keyed by the
request's JSON-RPC id, or the session's standalone GET stream, `_GET_stream`), plus an empty "priming"
event at the start of a 2025-11-25+ POST stream, and puts the returned id in the event's `id:` field. A
client that lost a stream reconnects with `GET /mcp` and `Last-Event-ID: <id>`; the transport calls
`replay_events_after`, which sends the later events of that id's stream, then keeps the stream live.

Stream keys are per session in the SDK (request ids like "1" and `_GET_stream` repeat in every session),
but a session manager has one event store for all its sessions. `ScopedSessionManager` therefore hands
each new session a `SessionEvents` view that prefixes its stream keys, so a session can only ever replay
its own events (the same approach as fastmcp's `SessionScopedEventStore`).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCMessage, jsonrpc_message_adapter


@dataclass
class _Event:
    id: EventId
    stream: StreamId
    data: bytes | None  # the message as the SDK writes it; None: a priming event (only its id matters)

    @property
    def size(self) -> int:
        return len(self.data or b"") + 64


class MemoryEventStore(EventStore):
    """Events kept in memory, at most `per_stream` per stream, `total` in all and about `max_bytes` of
    messages in all (a tool result can be large); when a bound is reached the oldest event (of that stream,
    or of the whole store) is dropped first. The newest event is always kept, however large.

    Event ids are random and opaque (they say nothing about the stream or order, and cannot be guessed);
    order is kept by the store. `replay_events_after(id)` sends the events stored after `id` on the same
    stream, skipping priming events, and returns that stream's key. An id the store does not know (never
    issued, or evicted since) replays nothing and returns None; the SDK then answers the `GET` with an SSE
    stream (200) that carries no events and ends at once, without re-attaching the client to the stream,
    so the client should open a fresh `GET /mcp` without `Last-Event-ID`.
    """

    def __init__(self, per_stream: int = 100, total: int = 10_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        if per_stream <= 0 or total <= 0 or max_bytes <= 0:
            raise ValueError("event store bounds must be positive")
        self.per_stream, self.total, self.max_bytes = per_stream, total, max_bytes
        self._events: OrderedDict[EventId, _Event] = OrderedDict()  # all events, oldest first
        self._streams: dict[StreamId, deque[_Event]] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._events)

    def _new_id(self) -> EventId:
        while (event_id := secrets.token_urlsafe(12)) in self._events:
            pass
        return event_id

    def _forget_oldest_of(self, stream: StreamId) -> None:
        events = self._streams[stream]
        event = events.popleft()
        self._events.pop(event.id, None)
        self.bytes -= event.size
        if not events:
            del self._streams[stream]

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        # Kept serialized: its size is known, and a live object graph would cost several times more.
        data = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        return await self.store_raw(stream_id, data)

    async def store_raw(self, stream_id: StreamId, data: bytes | None) -> EventId:
        """Store a message already serialized as JSON (the lean path's, leanstream.py); None: priming."""
        event = _Event(self._new_id(), stream_id, data)
        if len(self._streams.get(stream_id, ())) >= self.per_stream:
            self._forget_oldest_of(stream_id)
        while self._events and (len(self._events) >= self.total or self.bytes + event.size > self.max_bytes):
            oldest = next(iter(self._events.values()))
            self._forget_oldest_of(oldest.stream)  # a stream's oldest event is also the store's oldest of it
        self._streams.setdefault(stream_id, deque()).append(event)
        self._events[event.id] = event
        self.bytes += event.size
        return event.id

    def stream_of(self, event_id: EventId) -> StreamId | None:
        event = self._events.get(event_id)
        return event.stream if event is not None else None

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        event = self._events.get(last_event_id)
        if event is None:
            return None
        # Copied first: sending awaits, and new events may be stored (or old ones evicted) meanwhile.
        stream = list(self._streams.get(event.stream, ()))
        later = next((i + 1 for i, e in enumerate(stream) if e.id == last_event_id), len(stream))
        for found in stream[later:]:
            if found.data is not None:
                message = jsonrpc_message_adapter.validate_json(found.data, by_name=False)
                await send_callback(EventMessage(message, found.id))
        return event.stream


class SessionEvents(EventStore):
    """One session's view of a shared `MemoryEventStore`: its stream keys are prefixed with a key of its
    own, and an event id of another session's stream replays nothing (as if unknown)."""

    def __init__(self, store: MemoryEventStore, key: str) -> None:
        self._store, self._prefix = store, f"{key}/"

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        return await self._store.store_event(self._prefix + stream_id, message)

    async def store_raw(self, stream_id: StreamId, data: bytes | None) -> EventId:
        return await self._store.store_raw(self._prefix + stream_id, data)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        stream = self._store.stream_of(last_event_id)
        if stream is None or not stream.startswith(self._prefix):
            return None
        found = await self._store.replay_events_after(last_event_id, send_callback)
        return found[len(self._prefix) :] if found is not None else None


class ScopedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, with each session's transport given its own `SessionEvents` view.

    The SDK reads `self.event_store` once per new session, when it builds that session's transport (and
    not at all in stateless mode), so a property returning a fresh view scopes every session."""

    def __init__(self, app: Server[Any], *, event_store: MemoryEventStore | None = None, **kwargs: Any) -> None:
        self._shared_events = event_store
        super().__init__(app, event_store=event_store, **kwargs)

    @property
    def event_store(self) -> EventStore | None:
        if self._shared_events is None:
            return None
        return SessionEvents(self._shared_events, secrets.token_hex(16))

    @event_store.setter
    def event_store(self, value: EventStore | None) -> None:
        if value is not None and not isinstance(value, MemoryEventStore):
            raise TypeError("ScopedSessionManager needs a MemoryEventStore")
        self._shared_events = value
