"""What changes during a 2025-era MCP session (log level, subscriptions, visibility rules, `ctx.set_state`
values, what `toolman_activate` turned on), kept alike on every replica that holds the session
(sharedsessions.py opens and adopts sessions): a change is written to the store and sent to the other
replicas on a channel; the ones that hold the session take it at once (no store round trip on a request); a
replica adopting a session reads it. The last change wins. After a lost subscription comes back, held
sessions' state is read again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from tooldock.errors import StateUnavailable
from tooldock.runtime.mcp.session import SessionState
from tooldock.state import RESYNC, Store

log = logging.getLogger("tooldock.mcp")
CHANGED = "mcp-session-changes"  # the channel on which a session's changed state goes to the other replicas


class SessionSharing:
    """What changes in one namespace's sessions, kept alike on every replica that holds them."""

    def __init__(self, store: Store, namespace: str, replica: str, ttl: float) -> None:
        self.store, self.namespace, self.replica, self.ttl = store, namespace, replica, ttl
        self._states: weakref.WeakValueDictionary[str, SessionState] = weakref.WeakValueDictionary()
        # read at adoption, or heard before the session's state was made here: taken when it is made
        self._loaded: dict[str, dict[str, Any]] = {}
        # whether this replica's session manager holds a session (set by the MCP hub): one it opened itself
        # has no state here until its first list or call, and must not miss what other replicas change first
        self.held: Callable[[str], bool] = lambda sid: False
        self._order = asyncio.Lock()  # changes leave in the order they were made
        self._tasks: set[asyncio.Task[None]] = set()

    def key(self, sid: str) -> str:
        return f"mcp-session-state:{self.namespace}:{sid}"

    def made(self, state: SessionState) -> None:
        """A session's state was made here (its first request on this replica): follow its changes."""
        if state.sid is None:  # legacy SSE: one stream, one replica
            return
        state.on_change = self.changed
        self._states[state.sid] = state
        loaded = self._loaded.pop(state.sid, None)
        if loaded is not None:
            state.restore(loaded)

    async def _read(self, sid: str) -> Any:
        """The session's state as the store holds it (None: none, or not JSON)."""
        raw = await self.store.get(self.key(sid))
        try:
            return json.loads(raw) if raw is not None else None
        except ValueError:
            return None

    async def load(self, sid: str) -> None:
        """Read what the session's other replicas changed (at adoption)."""
        if (found := await self._read(sid)) is not None:
            self._loaded[sid] = found

    async def subscriptions(self, sid: str) -> list[str]:
        """The resources the session subscribed to: as held here, else as the store has them (none when it
        cannot be reached)."""
        state = self._states.get(sid)
        if state is not None:
            return sorted(state.subscriptions)
        try:
            found = await self._read(sid)
        except StateUnavailable:
            return []
        listed = found.get("subscriptions") if isinstance(found, dict) else None
        return [str(u) for u in listed] if isinstance(listed, list) else []

    def changed(self, state: SessionState) -> asyncio.Task[None]:
        """Send the session's state (in the order of its changes); the task ends once it is sent (or could
        not be: logged), for a request that answers only then (a `toolman_activate`)."""
        assert state.sid is not None
        task = asyncio.ensure_future(self._send(state.sid, state.snapshot()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _send(self, sid: str, snapshot: dict[str, Any]) -> None:
        text = json.dumps(snapshot)
        message = json.dumps({"ns": self.namespace, "sid": sid, "from": self.replica, "state": snapshot})
        try:
            async with self._order:
                await self.store.put(self.key(sid), text, self.ttl)
                await self.store.publish(CHANGED, message)
        except StateUnavailable as err:
            log.warning("MCP session %s changed here; other replicas were not told: %s", sid[:12], err)

    async def resync(self) -> None:
        """The store was lost and is back: take each held session's state from it again (changes sent
        meanwhile were missed)."""
        for sid, state in list(self._states.items()):
            with contextlib.suppress(StateUnavailable):
                if (found := await self._read(sid)) is not None:
                    state.restore(found)
        for sid in list(self._loaded):
            with contextlib.suppress(StateUnavailable):
                if (found := await self._read(sid)) is not None and sid in self._loaded:
                    self._loaded[sid] = found

    def heard(self, message: dict[str, Any]) -> None:
        """Another replica's change of a session this replica holds."""
        sid = str(message.get("sid"))
        if message.get("from") == self.replica:
            return
        state = self._states.get(sid)
        if state is not None:
            state.restore(message.get("state"))
        elif isinstance(message.get("state"), dict) and self.held(sid):
            self._loaded[sid] = message["state"]

    async def forget(self, sid: str) -> None:
        self._states.pop(sid, None)
        self._loaded.pop(sid, None)
        await self.store.delete(self.key(sid))


async def follow_changes(store: Store, sharing: Mapping[str, SessionSharing]) -> None:
    """Take the session changes other replicas send: `sharing` holds each namespace's SessionSharing."""
    messages: AsyncIterator[str] = store.subscribe(CHANGED)
    async for raw in messages:
        if raw == RESYNC:
            for each in list(sharing.values()):
                await each.resync()
            continue
        try:
            message = json.loads(raw)
            found = sharing.get(str(message["ns"]))
        except (ValueError, KeyError, TypeError):
            continue
        if found is not None:
            found.heard(message)
