"""What the MCP hub tells clients when a namespace changes outside their requests: 2025-era sessions (on
their standalone stream) and 2026-07-28 `subscriptions/listen` streams (fed by the namespace's `ListenBus`).

With replicas sharing a state store (issue 56), what changes is of two kinds:

- What every replica raises by itself, for its own clients: a reload (every replica reloads), a namespace
  whose lists changed as the replica sees them (an upstream server it runs that went away, a network
  namespace's workers). Each replica tells its own listen streams, so a stream hears it once, not once a
  replica; a shared session's GET stream hears it from the one replica that stores it there
  (sharedreloads.py), wherever the stream is held or resumed.
- What one replica raises for all: an upstream server's `resources/updated` (reaching the replicas whose
  connection to it had the subscription) and a 2026-07-28 client's `toolman_activate` (a change of the one
  view those clients share). `ListenBus.share` publishes it on this replica's bus and on a store channel;
  every other replica publishes what it hears there on its own bus (`follow`), so a listen stream on any
  replica hears it. A store that cannot be reached leaves it to this replica's streams (logged); one that
  was lost for a while loses what was sent meanwhile (a listen stream is not resumable anyway).

Nothing here runs on a request that changes nothing: a plain call makes no store round trip.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)

from tooldock.errors import StateUnavailable
from tooldock.state import RESYNC, Store

log = logging.getLogger("tooldock.mcp")
CHANNEL = "mcp-listen-events"  # what one replica raises for every replica's listen streams
KINDS: dict[type, str] = {ToolsListChanged: "tools", ResourcesListChanged: "resources", PromptsListChanged: "prompts"}
LISTS = {kind: made for made, kind in KINDS.items()}


def event_json(event: ServerEvent) -> dict[str, str]:
    if isinstance(event, ResourceUpdated):
        return {"kind": "resource", "uri": event.uri}
    return {"kind": KINDS[type(event)]}


def event_of(data: Any) -> ServerEvent | None:
    """An event as `event_json` wrote it (None: not one)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "resource" and isinstance(data.get("uri"), str):
        return ResourceUpdated(uri=data["uri"])
    made = LISTS.get(kind) if isinstance(kind, str) else None
    return made() if made is not None else None


class ListenBus(InMemorySubscriptionBus):
    """A namespace's listen streams on this replica. `publish` reaches them; `share` reaches every replica's."""

    def __init__(self, namespace: str, send: Callable[[str, list[ServerEvent]], Awaitable[None]] | None) -> None:
        super().__init__()
        self.namespace, self._send = namespace, send

    async def share(self, *events: ServerEvent) -> None:
        for event in events:
            await self.publish(event)
        if self._send is not None:
            await self._send(self.namespace, list(events))


class Notices:
    """The hub's change notices: `buses` (2026-07-28 listen streams) and `sessions` (2025-era connections
    seen, with their SessionState) per namespace. `store` and `replica`: the shared store, with replicas."""

    def __init__(self, engine: Any, replication: Any) -> None:
        self.engine, self.replication = engine, replication
        self.buses: dict[str, ListenBus] = {}
        # Connections seen per namespace (from their first request that lists or calls), for change notices.
        self.sessions: dict[str, weakref.WeakKeyDictionary] = {}
        self.store: Store | None = replication.store if replication is not None else None
        self.replica: str = replication.replica if replication is not None else ""

    def bus(self, namespace: str) -> ListenBus:
        if namespace not in self.buses:
            self.buses[namespace] = ListenBus(namespace, self._send if self.store is not None else None)
        return self.buses[namespace]

    async def _send(self, namespace: str, events: list[ServerEvent]) -> None:
        assert self.store is not None
        message = {"ns": namespace, "from": self.replica, "events": [event_json(e) for e in events]}
        try:
            await self.store.publish(CHANNEL, json.dumps(message))
        except StateUnavailable as err:
            log.warning("MCP listen streams of %s on other replicas were not told of a change: %s", namespace, err)

    async def follow(self) -> None:
        """Publish on this replica's buses what the other replicas share (`ListenBus.share`)."""
        assert self.store is not None
        messages: AsyncIterator[str] = self.store.subscribe(CHANNEL)
        async for raw in messages:
            if raw == RESYNC:  # what was sent meanwhile is lost: a listen stream has nothing to resume
                continue
            try:
                message = json.loads(raw)
                namespace, origin, listed = str(message["ns"]), message.get("from"), list(message["events"])
            except (ValueError, KeyError, TypeError):
                continue
            bus = self.buses.get(namespace)
            if bus is None or origin == self.replica:  # no listen stream here ever, or told here already
                continue
            for data in listed:
                if (event := event_of(data)) is not None:
                    await bus.publish(event)

    async def tools_changed(self, namespaces: list[str]) -> None:
        """A namespace's lists changed (reload, rebuild, removal): tell its open sessions. Every session
        hears `list_changed` for tools, resources and prompts; a session subscribed to a resource of the
        namespace also hears `resources/updated` for it, since the code behind it may have changed. Every
        replica does this for its own clients (see the module's docstring)."""
        for namespace in namespaces:
            bus = self.buses.get(namespace)
            if bus is not None:  # 2026-07-28 listeners: each gets only the kinds its filter asked for
                for event in (ToolsListChanged(), ResourcesListChanged(), PromptsListChanged()):
                    await bus.publish(event)
                entry = self.engine.registry.snapshot.entries.get(namespace) if self.engine else None
                for resource in entry.surface("resources") if entry is not None else ():
                    await bus.publish(ResourceUpdated(uri=resource["uri"]))
            if self.replication is not None:  # shared sessions: told once, through their GET stream in the store
                await self.replication.reloaded(namespace)
            sessions = self.sessions.get(namespace) or weakref.WeakKeyDictionary()
            for session, state in [(c, s) for c, s in list(sessions.items()) if not (s.sid and self.replication)]:
                try:
                    await session.send_tool_list_changed()
                    await session.send_resource_list_changed()
                    await session.send_prompt_list_changed()
                    for uri in sorted(state.subscriptions):
                        await session.send_resource_updated(uri)
                except Exception:  # a closed session: forget it
                    sessions.pop(session, None)

    async def resource_updated(self, namespace: str, uri: str) -> None:
        """An upstream server said a resource changed: tell the sessions subscribed to it, and every replica's
        listen streams."""
        await self.bus(namespace).share(ResourceUpdated(uri=uri))
        for session, state in list((self.sessions.get(namespace) or {}).items()):
            if uri in state.subscriptions:
                try:
                    await session.send_resource_updated(uri)
                except Exception:  # a closed session: forget it
                    self.sessions[namespace].pop(session, None)

    def session_counts(self, managers: dict[str, Any]) -> dict[str, int]:
        """Open MCP sessions per namespace (for the metrics): a closed streamable HTTP session leaves the count
        at once (the SDK no longer holds its id), not when the garbage collector frees its connection."""
        counts = {}
        for namespace, sessions in list(self.sessions.items()):
            live = getattr(managers.get(namespace), "_server_instances", {})
            counts[namespace] = sum(1 for state in list(sessions.values()) if state.sid is None or state.sid in live)
        return counts
