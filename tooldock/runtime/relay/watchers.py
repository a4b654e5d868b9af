"""The connections that asked `tooldock_watch_tools`, and what they are told. A watching connection gets
`notifications/tools/list_changed` when

- a reload (or an upstream server's new list) changes the tools of a namespace its key covers
  (`tools_changed`, a registry listener), or
- its key is revoked or expires (the gateway's KeyGuard finds out within a second or so): its client,
  listing again, is refused and serves no tools, or
- it called an upstream namespace's `toolman_activate` (its own view changed), before that call's answer,
  as an MCP session is told.

A key found revoked or expired, either way, is told once and no longer watched. Announcements go to all
the connections at once: one that stopped reading holds up only its own, for at most TELL_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib

from tooldock.keys import ApiKey
from tooldock.runtime.keyguard import Hold, KeyGuard
from tooldock.runtime.relay.protocol import LIST_CHANGED, Send, notification

TELL_TIMEOUT = 5.0  # seconds an announcement may wait for a connection's writer


async def _tell(send: Send) -> None:
    with contextlib.suppress(OSError, TimeoutError):  # a connection going: its own task cleans up
        await asyncio.wait_for(send(notification(LIST_CHANGED)), TELL_TIMEOUT)


class Watchers:
    def __init__(self, guard: KeyGuard) -> None:
        self.guard = guard
        self._watching: dict[Send, Hold] = {}  # a watching connection's writer, and its key's hold

    def add(self, send: Send, key: ApiKey) -> None:
        self.remove(send)  # asked twice: one hold

        async def revoked() -> None:
            self._watching.pop(send, None)
            await _tell(send)

        self._watching[send] = self.guard.hold(key, revoked)

    def remove(self, send: Send) -> None:
        held = self._watching.pop(send, None)
        if held is not None:
            held.release()

    async def activated(self, send: Send) -> None:
        """The connection `send` changed its own view of an upstream namespace: told if it is watching."""
        if send in self._watching:
            await _tell(send)

    async def tools_changed(self, namespaces: list[str]) -> None:
        """A registry listener: tell each watcher whose key covers one of `namespaces` (checking the key
        first: a revoked one is told once, by its hold, and dropped)."""

        async def tell(send: Send, held: Hold) -> None:
            if any(held.key.allows_namespace(name) for name in namespaces):  # else no need to read the keys
                if await self.guard.recheck(held):
                    await _tell(send)

        await asyncio.gather(*(tell(send, held) for send, held in list(self._watching.items())))

    def close(self) -> None:
        for send in list(self._watching):
            self.remove(send)
