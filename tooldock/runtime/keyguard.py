"""What lives on after its API key was checked, and must end (or be told) when the key is revoked or
expires: a call in flight (the engine stops it), an HTTP event stream (an MCP GET stream, a legacy SSE
stream, a call answered as SSE), a relay connection watching its tools. Every new request checks its key
anyway; these are what would otherwise outlive a revocation. An OAuth token's principal (not in the keys file)
is held until the token expires.

While anything is held, the keys file is looked at once a second (`stat`: `tooldock keys revoke` replaces it
whole) and the held keys are checked again (one read for all) when it changed, and a key on its own when
its expiry time has passed. A key found invalid has its holds' `on_invalid` run once, and they are dropped.
A keys file that cannot be read (half-written by hand, a network filesystem's hiccup) revokes nothing: new
requests with keys are refused meanwhile (`KeyStore.check` fails closed), what lives on is checked again at
the next poll (a key whose expiry passed ends all the same: the held key carries its expiry), and the
operator is told once.

Why `stat` rather than inotify (watchfiles): the keys file may be shared by gateways on other machines
(`TOOLDOCK_KEYS_DIR` on a network filesystem), where inotify does not see another machine's writes; a stat
a second costs nothing and needs no thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from tooldock.errors import KeysError
from tooldock.keys import ApiKey, KeyStore, file_signature

KEYS_POLL = 1.0  # seconds between looks at the keys file while anything is held
log = logging.getLogger("tooldock.access")


def _signature(path: Path) -> tuple[int, ...] | None:
    """The keys file's `file_signature` (the one the store's own reads go by); None when it cannot be looked
    at either (then the next look counts as a change)."""
    try:
        return file_signature(path)
    except OSError:
        return None


class Hold:
    """One thing living on a checked key. `release()` when it ends on its own (idempotent); `ended` is True
    once the guard found the key invalid and ran `on_invalid`."""

    __slots__ = ("ended", "guard", "key", "on_invalid")

    def __init__(self, guard: KeyGuard, key: ApiKey, on_invalid: Callable[[], Awaitable[None]]) -> None:
        self.guard, self.key, self.on_invalid, self.ended = guard, key, on_invalid, False

    def release(self) -> None:
        self.guard._holds.discard(self)


class KeyGuard:
    def __init__(self, keys: KeyStore, poll: float = KEYS_POLL) -> None:
        self.keys, self.poll = keys, poll
        self._holds: set[Hold] = set()
        self._task: asyncio.Task[None] | None = None
        self._unreadable = False  # the last read of the keys file failed (warned once)

    def __len__(self) -> int:
        return len(self._holds)

    def hold(self, key: ApiKey, on_invalid: Callable[[], Awaitable[None]]) -> Hold:
        """Run `on_invalid` (once) when `key` is revoked or expires."""
        held = Hold(self, key, on_invalid)
        self._holds.add(held)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._watch())
        return held

    async def recheck(self, held: Hold) -> bool:
        """Check `held`'s key now; False (and its `on_invalid` run, once) when it is no longer valid (an
        unreadable keys file leaves it valid: see the module's docstring)."""
        if not held.key.in_keys_file:  # an OAuth token's principal: valid until it expires
            if held.key.expires is None or held.key.expires > datetime.now(UTC):
                return True
            await self._end(held)
            return False
        active = await self._active({held.key.id})
        if active is None or held.key.id in active:
            return True
        await self._end(held)
        return False

    async def _active(self, key_ids: set[str]) -> set[str] | None:
        """The keys of `key_ids` still active; None when the keys file cannot be read (said once, until it can)."""
        try:
            active = await asyncio.to_thread(self.keys.active, key_ids)
        except KeysError as exc:
            if not self._unreadable:
                log.warning(
                    "cannot read the keys file (%s): requests with API keys are refused until it can be; "
                    "calls and streams already running go on",
                    exc,
                )
            self._unreadable = True
            return None
        if self._unreadable:
            log.warning("the keys file can be read again")
        self._unreadable = False
        return active

    async def close(self) -> None:
        self._holds.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _end(self, held: Hold) -> None:
        if held not in self._holds:
            return  # ended already (the poll and a caller both looked), or released
        held.release()
        held.ended = True
        try:
            await held.on_invalid()
        except Exception:  # one hold's failure must not stop the others' (the guard runs on)
            log.exception("key %s: ending what it held failed", held.key.id)

    async def _watch(self) -> None:
        path = self.keys.path
        seen = await asyncio.to_thread(_signature, path)
        while self._holds:
            await asyncio.sleep(self.poll)
            current = await asyncio.to_thread(_signature, path)
            changed, seen, now = current != seen, current, datetime.now(UTC)
            due = [
                h
                for h in list(self._holds)
                if (changed and h.key.in_keys_file) or (h.key.expires is not None and h.key.expires <= now)
            ]
            if due:
                active = await self._active({h.key.id for h in due})
                if active is None:  # only what the held keys say themselves: expiry
                    seen = None  # look again at the next poll, whether or not the file changes meanwhile
                    due = [h for h in due if h.key.expires is not None and h.key.expires <= now]
                    active = set()
                await asyncio.gather(*(self._end(h) for h in due if h.key.id not in active))
