"""A reload's list changes reach every shared 2025-era session with a GET stream, once (issue 56).

Every replica reloads (reloads.share), so every replica sees a namespace's lists change. One of them, not
one per replica, writes the notices (`notifications/{tools,resources,prompts}/list_changed`, and
`resources/updated` for each resource the session subscribed to) into the GET stream, in the state store,
of every session of the namespace that ever opened a standalone `GET /mcp` (whether or not a replica holds
it open now):

- Which one: the store keeps the namespace's lists as last told (a digest of its tools, resources, resource
  templates and prompts). A replica whose lists changed swaps its digest in (`Store.swap`, atomic); the one
  that gets another digest back tells, the others (same lists, same digest) get theirs back and do nothing.
  It does not matter which replica reloaded first, whose reload it was, or whether a replica's own watcher
  saw the change: a change is told once, and a change back (A, B, then A again) is a change too.
- Which sessions: a fresh GET stream adds its session to the namespace's group in the store (for the
  sessions' lifetime, MCP_SESSION_TTL_HOURS); a DELETE takes it out. A session that never opened a GET
  stream has nowhere to hear anything outside a request, and is not told.
- How they hear it: the notices are stored with no replica's name (`EVERYONE`), so the replica holding the
  session's GET stream, this one included, sends them on it as it sends what other replicas raise
  (sharednotices.py), and a client that resumes with `Last-Event-ID` on any replica gets them in the replay.
  A client that opens a fresh GET without `Last-Event-ID` gets no history (the MCP spec's resumability).

Cost: one swap per changed namespace on each replica; for the teller, one read of the group, one read of
the session's state per session not held here (its subscriptions), and one pipelined write of all the
notices. Nothing on a request. A store that cannot be reached: each replica tells the GET streams it holds
itself (`GetStreams.reloaded`), as before, so a client may then hear a reload once a replica.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.streamable_http import GET_STREAM_KEY

from tooldock.errors import StateUnavailable
from tooldock.runtime.mcp.sharedevents import KEPT_SECONDS, session_events_key, stream_key
from tooldock.runtime.mcp.sharednotices import GetStreams
from tooldock.state import Store

log = logging.getLogger("tooldock.mcp")
EVERYONE = ""  # the origin stored with a reload's notices: no replica sent them itself, every holder sends them
LISTS_KEPT = 7 * 24 * 3600.0  # seconds a namespace's told lists are kept (expired: the next change is told)
KINDS = ("tools", "resources", "prompts")


def digest(entry: Any) -> str:
    """What clients list for a namespace's registry entry (None: the namespace is gone), as a short digest
    that replicas serving the same lists agree on."""
    if entry is None:
        return "gone"
    surface = entry.worker.surface if entry.worker is not None else {}
    text = json.dumps([entry.tools, surface], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def group(namespace: str) -> str:
    """The store's name for the namespace's sessions that opened a GET stream."""
    return f"mcp-get-streams:{namespace}"


def notices(uris: list[str]) -> list[str]:
    """A reload's notices to one session (subscribed to `uris`), as stored: origin, newline, message JSON."""
    found: list[dict[str, Any]] = [{"method": f"notifications/{kind}/list_changed"} for kind in KINDS]
    found += [{"method": "notifications/resources/updated", "params": {"uri": uri}} for uri in sorted(uris)]
    return [f"{EVERYONE}\n" + json.dumps({"jsonrpc": "2.0", **n}, separators=(",", ":")) for n in found]


class ReloadNotices:
    """Which sessions of each namespace have a GET stream, and the telling of a reload to them."""

    def __init__(self, store: Store, ttl: float, keep: int) -> None:
        """`ttl`: a session's lifetime (MCP_SESSION_TTL_HOURS, in seconds); `keep`: entries kept a stream."""
        self.store, self.ttl, self.keep = store, ttl, keep

    async def opened(self, namespace: str, sid: str) -> None:
        """Session `sid` opened a fresh GET stream: it hears the namespace's reloads from now on."""
        await self.store.add_member(group(namespace), sid, self.ttl)

    async def ended(self, namespace: str, sid: str) -> None:
        await self.store.remove_member(group(namespace), sid)

    async def changed(
        self, namespace: str, lists: str, subscriptions: Callable[[str], Awaitable[list[str]]]
    ) -> int | None:
        """The namespace's lists are now `lists` (a digest) here: when no replica told that yet, tell every
        session of its group. The sessions told (0: another replica told them); raises StateUnavailable."""
        if await self.store.swap(f"mcp-lists:{namespace}", lists, LISTS_KEPT) == lists:
            return 0
        sids = await self.store.members(group(namespace))
        items = []
        for sid in sids:
            stream = stream_key(session_events_key(namespace, sid), GET_STREAM_KEY)
            items += [(stream, value) for value in notices(await subscriptions(sid))]
        await self.store.append_many(items, self.keep, KEPT_SECONDS)
        log.info("a reload's list changes of %s were told to %d session(s) with a GET stream", namespace, len(sids))
        return len(sids)


async def tell(
    reloads: ReloadNotices,
    namespace: str,
    lists: str,
    subscriptions: Callable[[str], Awaitable[list[str]]],
    get_streams: GetStreams,
    manager: Any,
) -> None:
    """`ReloadNotices.changed`; when the store cannot be reached, the GET streams this replica holds for
    `manager` (the namespace's session manager here, if any) hear it from this replica."""
    try:
        await reloads.changed(namespace, lists, subscriptions)
    except StateUnavailable as err:
        log.warning("a reload of %s is told only to the GET streams each replica holds: %s", namespace, err)
        await get_streams.reloaded(manager, subscriptions)
