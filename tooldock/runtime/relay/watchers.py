"""The connections that asked `tooldock_watch_tools`, and what they are told. A watching connection gets
`notifications/tools/list_changed` when

- a reload (or an upstream server's new list) changes the tools of a namespace its key covers
  (`tools_changed`, a registry listener), or
- its key is revoked or expires: its client, listing again, is refused and serves no tools. While anyone
  watches, the keys file is looked at once a second (`stat`: it is replaced whole on every change) and the
  watchers' keys are checked again when it changed, and a key's own when its expiry time has passed.

A key found revoked or expired, either way, is told once and no longer watched. Announcements go to all
the connections at once: one that stopped reading holds up only its own, for at most TELL_TIMEOUT.

Why `stat` rather than inotify (watchfiles): the keys file may be shared by gateways on other machines
(`TOOLDOCK_KEYS_DIR` on a network filesystem), where inotify does not see another machine's writes; a stat
a second costs nothing and needs no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path

from tooldock.keys import ApiKey
from tooldock.runtime.relay.methods import RelayMethods
from tooldock.runtime.relay.protocol import LIST_CHANGED, Send, notification

TELL_TIMEOUT = 5.0  # seconds an announcement may wait for a connection's writer
KEYS_POLL = 1.0  # seconds between looks at the keys file while anyone watches


def _signature(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


class Watchers:
    def __init__(self, methods: RelayMethods, poll: float = KEYS_POLL) -> None:
        self.methods, self.poll = methods, poll
        # A watching connection's writer, the key it presented and that key as it was then (a key's scope
        # and expiry never change; whether it is still valid is checked again when that may have changed).
        self._watching: dict[Send, tuple[str, ApiKey]] = {}
        self._guard: asyncio.Task[None] | None = None

    def add(self, send: Send, presented: str, key: ApiKey) -> None:
        self._watching[send] = (presented, key)
        if self._guard is None or self._guard.done():
            self._guard = asyncio.ensure_future(self._guard_keys())

    def remove(self, send: Send) -> None:
        self._watching.pop(send, None)

    async def tools_changed(self, namespaces: list[str]) -> None:
        """A registry listener: tell each watcher whose key covers one of `namespaces`."""

        async def tell(send: Send, presented: str, key: ApiKey) -> None:
            if any(key.allows_namespace(name) for name in namespaces):  # else no need to read the key store
                await self._recheck(send, presented, tell_anyway=True)

        await asyncio.gather(*(tell(send, *watch) for send, watch in list(self._watching.items())))

    async def close(self) -> None:
        self._watching.clear()
        if self._guard is not None:
            self._guard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._guard
            self._guard = None

    async def _recheck(self, send: Send, presented: str, tell_anyway: bool = False) -> None:
        """Check the key again: told (and dropped) when it is no longer valid, told when `tell_anyway`."""
        if await self.methods.still_valid(presented) is None:
            if self._watching.pop(send, None) is None:
                return  # told already (the guard and a reload both found it)
        elif not tell_anyway:
            return
        with contextlib.suppress(OSError, TimeoutError):  # a connection going: its own task cleans up
            await asyncio.wait_for(send(notification(LIST_CHANGED)), TELL_TIMEOUT)

    async def _guard_keys(self) -> None:
        """While anyone watches: check the watchers' keys again when the keys file changed, and a key whose
        expiry time has passed."""
        path = self.methods.keys.path
        seen = await asyncio.to_thread(_signature, path)
        while self._watching:
            await asyncio.sleep(self.poll)
            current = await asyncio.to_thread(_signature, path)
            changed, seen, now = current != seen, current, datetime.now(UTC)
            due = [
                (send, presented)
                for send, (presented, key) in list(self._watching.items())
                if changed or (key.expires is not None and key.expires <= now)
            ]
            await asyncio.gather(*(self._recheck(send, presented) for send, presented in due))
