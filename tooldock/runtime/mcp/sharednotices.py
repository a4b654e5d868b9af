"""Notifications reach a session's standalone GET stream on whichever replica holds it (issue 56).

What a replica raises for a 2025-era session outside a request (a `toolman_activate`'s list changes, an
upstream server's `resources/updated` for a subscription, a reload's list changes) goes, through the SDK's
transport, to that session's standalone stream, and every message of it is first stored in the session's
GET stream in the state store (sharedevents.py; each entry names the replica that stored it). The replica
holding the client's `GET /mcp` stream follows that store stream (`GetStreams`): what other replicas stored
there is sent on the client's stream, under the same event id, so a client that reconnects with
`Last-Event-ID` to any replica resumes from it (the replay reads the same store stream, then follows it
from where it ended). What this replica stored itself went out already.

One reader per replica follows all the GET streams it holds (one blocking read of up to half a second for
all of them, only while there is one): a plain call does nothing here, and a notification costs no round
trip beyond its store write. A store lost for a while delays the notifications (each stream is read from
where it was), none is lost unless it was trimmed meanwhile (MCP_EVENT_BUFFER per stream).

Reloads reach every replica: one of them stores the notices in the GET stream of every session that has
one (sharedreloads.py), and they reach the client as above, once, wherever its stream is held or resumed.
Only while the store cannot be reached does each replica tell the streams it holds itself (`reloaded`).
Server-to-client requests are not passed on (their answer would reach a replica that did not ask), only
notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.streamable_http import GET_STREAM_KEY, EventMessage
from mcp_types import JSONRPCNotification, jsonrpc_message_adapter
from pydantic import ValidationError

from tooldock.errors import StateUnavailable
from tooldock.runtime.mcp.sharedevents import GET_STREAM, event_id, split_entry
from tooldock.state import Store

log = logging.getLogger("tooldock.mcp")
PENDING_SECONDS = 5.0  # a GET being opened that has not registered its stream by then is forgotten
WAIT = 0.5  # the longest blocking read (a stream opened meanwhile is followed from the next read on)
RELOAD = ("tools", "resources", "prompts")


@dataclass
class Follow:
    """One session's standalone stream held (or being opened) here, and the store entry read last."""

    manager: Any  # the namespace's SharedSessionManager
    sid: str
    after: str
    since: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    active: bool = False  # its transport has registered the stream

    def streams(self) -> Any:
        """The transport's (sender, receiver) of the GET stream, or None when it is not open here."""
        transport = self.manager._server_instances.get(self.sid)
        if transport is None or transport.is_terminated:
            return None
        return transport._request_streams.get(GET_STREAM_KEY)


class GetStreams:
    """The standalone streams this replica holds, each fed what the other replicas store for its session."""

    def __init__(self, store: Store, replica: str) -> None:
        self.store, self.replica = store, replica
        self._follows: dict[str, Follow] = {}  # by store stream
        self._wake = asyncio.Event()
        self._lost = False

    def follow(self, manager: Any, sid: str, stream: str, after: str, *, replay: bool) -> None:
        """Follow `stream` (a session's GET stream in the store) from `after`. A fresh GET does not move a
        stream already followed (a second GET is refused by the SDK: 409); a replay does (it sent up to there)."""
        found = self._follows.get(stream)
        if found is not None and found.active and not replay:
            return
        self._follows[stream] = Follow(manager, sid, after)
        self._wake.set()

    def _positions(self) -> tuple[dict[str, str], bool]:
        """Where to read each stream open here (forgetting those that closed), and whether one is opening."""
        now, ready, opening = asyncio.get_running_loop().time(), {}, False
        for stream, found in list(self._follows.items()):
            if found.streams() is not None:
                found.active = True
                ready[stream] = found.after
            elif found.active or now - found.since > PENDING_SECONDS:
                del self._follows[stream]
            else:
                opening = True
        return ready, opening

    async def run(self) -> None:
        while True:
            try:
                await self._step()
            except Exception:  # never let one bad stream end the hub's task group: look again shortly
                log.exception("MCP GET streams: following other replicas' notifications failed")
                await asyncio.sleep(WAIT)

    async def _step(self) -> None:
        """Read once what other replicas stored for the GET streams held here, and send it on them."""
        ready, opening = self._positions()
        if not ready:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.02 if opening else None)
            return
        try:
            found = await self.store.read_new(ready, WAIT)
        except StateUnavailable as err:
            if not self._lost:
                log.warning("MCP GET streams: other replicas' notifications wait for the store (%s)", err)
            self._lost = True
            await asyncio.sleep(WAIT)
            return
        self._lost = False
        for stream, entries in found.items():
            follow = self._follows.get(stream)
            if follow is None or follow.after != ready[stream]:  # moved meanwhile by a replay
                continue
            follow.after = entries[-1][0]
            self._deliver(follow, entries)

    def _deliver(self, follow: Follow, entries: list[tuple[str, str]]) -> None:
        streams = follow.streams()
        for entry, value in entries:
            origin, data = split_entry(value)
            if streams is None or not data or origin == self.replica:  # a priming event, or sent here already
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(data, by_name=False)
            except ValidationError:
                continue
            if not isinstance(message, JSONRPCNotification):
                continue
            try:
                streams[0].send_nowait(EventMessage(message, event_id(GET_STREAM, entry)))
            except anyio.WouldBlock:  # the client reads too slowly: it may resume with Last-Event-ID
                log.warning("MCP session %s: a notification from another replica was dropped", follow.sid[:12])
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async def reloaded(self, manager: Any, subscriptions: Any) -> None:
        """A reload here changed the namespace of `manager` while the store could not be reached
        (sharedreloads.py): each session whose GET stream this replica holds hears its lists changed, and
        `resources/updated` for each resource it subscribed to (`subscriptions`: sid -> awaitable of the URIs),
        stored first as the SDK's transport stores what it sends."""
        for follow in [f for f in list(self._follows.values()) if f.manager is manager and f.active]:
            transport = manager._server_instances.get(follow.sid)
            streams = follow.streams()
            if streams is None or transport is None:
                continue
            notices: list[dict[str, Any]] = [{"method": f"notifications/{kind}/list_changed"} for kind in RELOAD]
            for uri in sorted(await subscriptions(follow.sid)):
                notices.append({"method": "notifications/resources/updated", "params": {"uri": uri}})
            for notice in notices:
                message = jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", **notice})
                try:
                    stored = await transport._event_store.store_event(GET_STREAM_KEY, message)
                    await streams[0].send(EventMessage(message, stored))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, StateUnavailable):
                    break
