"""Resumable SSE across replicas (issue 56): a session's events in the shared state store, so a client that
lost a stream resumes it with `Last-Event-ID` on any replica.

`SharedEvents` is the MCP SDK's `EventStore` for one session of a `SharedSessionManager`: every event the
SDK's transport or the lean path (leanstream.py) sends on a stream is appended to a store stream of that
session (Redis Streams: one round trip per event, the write and its expiry pipelined) before it is sent, and
its SSE id names the stream and the entry. A `GET` with `Last-Event-ID` on any replica:

- replays the stream's later events;
- for a POST's stream (a call), then waits for the rest as the replica running the call stores them and
  sends them as they come, up to the call's response, and ends the stream: the client gets every event it
  missed, then the rest, then the result, whichever replica runs the call. A call whose replica died sends
  nothing more; the stream then ends once nothing came for the call's time limit (plus a margin);
- for the session's standalone stream, goes on live on this replica: what is raised here, and what other
  replicas raise for the session, which this replica reads from the stream as they store it
  (sharednotices.py).

Each stored message names the replica that stored it (`replica\n` before the JSON), so the replica that
holds a standalone stream sends what others raised and not again what it sent itself.

The store key is the session's (a hash of the namespace and session id), never the client's input alone: an
event id of another session names a stream this session does not have, and replays nothing. Event ids are
the stream's name (base64) and the store's entry id; both are checked before use.

A store that cannot be reached while a call streams does not fail the call: its events are kept in this
replica's memory buffer (resumable here only) until the store answers again. A replay that cannot reach the
store replays nothing (the SDK then ends the GET at once, and the client opens a fresh stream).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
from collections.abc import Callable

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter

from tooldock.errors import StateUnavailable
from tooldock.runtime.mcp.events import SessionEvents
from tooldock.state import Store

log = logging.getLogger("tooldock.mcp")
GET_STREAM = "_GET_stream"  # the SDK's key for a session's standalone stream
KEPT_SECONDS = 900.0  # a stream is kept this long after its last event: how late a client may resume
TAIL_MARGIN = 5.0  # seconds past a call's time limit that a resumed stream waits for the next event
_SEPARATOR = "."


def _encode(stream: StreamId) -> str:
    return base64.urlsafe_b64encode(stream.encode()).decode().rstrip("=")


def _decode(encoded: str) -> StreamId | None:
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def event_id(stream: StreamId, entry: str) -> EventId:
    """The SSE id of a stored event: its stream and entry."""
    return f"{_encode(stream)}{_SEPARATOR}{entry}"


def stream_key(key: str, stream: StreamId) -> str:
    """The store's name for one stream of a session (`key`: session_events_key)."""
    return f"events:{key}:{_encode(stream)}"


def split_entry(value: str) -> tuple[str, str]:
    """A stored entry's (replica that stored it, message JSON); the JSON is "" for a priming event."""
    origin, newline, data = value.partition("\n")
    return (origin, data) if newline else ("", value)


def session_events_key(namespace: str, sid: str) -> str:
    """The store's name for a session's event streams: the same on every replica, not guessable from outside."""
    return hashlib.sha256(f"{namespace}\0{sid}".encode()).hexdigest()[:32]


class SharedEvents(EventStore):
    """One session's events in the shared store, with `local` (this replica's bounded buffer) as fallback."""

    def __init__(
        self,
        store: Store,
        key: str,
        keep: int,
        local: SessionEvents,
        tail_for: Callable[[], float],
        origin: str = "",
        follow: Callable[[str], None] | None = None,
    ) -> None:
        """`origin`: this replica's name, stored with each event; `follow`: told the standalone stream's entry
        a replay ended at (the stream goes on live here from it: sharednotices.py)."""
        self.store, self.key, self.keep, self.local, self.tail_for = store, key, keep, local, tail_for
        self.origin, self.follow = origin, follow

    def _stream_key(self, stream: StreamId) -> str:
        return stream_key(self.key, stream)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        data = None if message is None else message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        return await self.store_raw(stream_id, data)

    async def store_raw(self, stream_id: StreamId, data: bytes | None) -> EventId:
        """Store a message serialized as JSON (None: a priming event); its SSE id."""
        try:
            value = "" if data is None else f"{self.origin}\n{data.decode()}"
            entry = await self.store.append(self._stream_key(stream_id), value, self.keep, KEPT_SECONDS)
        except StateUnavailable as err:
            log.warning("an MCP stream's event is kept on this replica only (%s)", err)
            return await self.local.store_raw(stream_id, data)
        return event_id(stream_id, entry)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        encoded, dot, entry = last_event_id.rpartition(_SEPARATOR)
        stream = _decode(encoded) if dot else None
        if stream is None:  # not an id of the store: maybe one of this replica's buffer
            return await self.local.replay_events_after(last_event_id, send_callback)
        key = self._stream_key(stream)
        try:
            found = await self.store.read_after(key, entry)
            if found is None:
                return None
            done = await self._send(found, encoded, send_callback)
            if stream == GET_STREAM:  # live from here: what any replica raises for the session
                if self.follow is not None:
                    self.follow(found[-1][0] if found else entry)
                return stream
            await self._tail(key, found[-1][0] if found else entry, encoded, send_callback, done)
        except StateUnavailable as err:
            log.warning("an MCP stream could not be resumed: %s", err)
        return None  # the replay ends with the call's response (or when nothing more can come)

    async def _tail(self, key: str, last: str, encoded: str, send: EventCallback, done: bool) -> None:
        """The rest of a call's stream as it is stored (by whichever replica runs it), up to its response."""
        loop = asyncio.get_running_loop()
        quiet_until = loop.time() + self.tail_for()
        while not done and loop.time() < quiet_until:
            more = await self.store.read_after(key, last, wait=0.5)
            if more is None:  # the stream expired or was trimmed past where we are
                return
            if more:
                last, quiet_until = more[-1][0], loop.time() + self.tail_for()
                done = await self._send(more, encoded, send)

    @staticmethod
    async def _send(entries: list[tuple[str, str]], encoded: str, send: EventCallback) -> bool:
        """Send the entries' messages (not priming events); True once one was a response (the call's end)."""
        done = False
        for entry, value in entries:
            value = split_entry(value)[1]
            if not value:
                continue
            message = jsonrpc_message_adapter.validate_json(value, by_name=False)
            await send(EventMessage(message, f"{encoded}{_SEPARATOR}{entry}"))
            done = done or isinstance(message, JSONRPCResponse | JSONRPCError)
        return done
