"""The store's interface. Implementations: memory.py (one process), redisstore.py (shared by replicas)."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping, Sequence

RESYNC = ""  # what `subscribe` yields after its subscription was lost and is back


class Store(abc.ABC):
    """What the gateway keeps where every replica sees it. Every method may raise `StateUnavailable`
    (tooldock.errors) when the store cannot answer within its time limit; none waits longer."""

    kind: str  # "memory" or "redis", for /health and the logs
    shared: bool  # True when other processes see the same state

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the state is, fit for a log line (a URL without its password)."""

    @abc.abstractmethod
    async def check(self) -> None:
        """Reach the store once (StateUnavailable when it cannot be): done at start, so a gateway that
        cannot reach its store does not start."""

    async def take_token(self, bucket: str, rate: float, burst: float) -> float:
        """Take one token from `bucket`: 0.0 when taken, else the seconds until one is back (`take_tokens`)."""
        _, wait = await self.take_tokens(bucket, rate, burst, 1)
        return wait

    @abc.abstractmethod
    async def take_tokens(self, bucket: str, rate: float, burst: float, want: int) -> tuple[int, float]:
        """Take up to `want` tokens from `bucket` (a token bucket of `burst` tokens, refilled at `rate` a
        second, full when new or when its rate or burst changed): (how many were taken, 0.0), or (0, the
        seconds until one is back) when there is none. Atomic: replicas taking from one bucket at once never
        take more than it holds."""

    @abc.abstractmethod
    async def put(self, key: str, value: str, ttl: float) -> None:
        """Keep `value` under `key` for `ttl` seconds (replacing what was there)."""

    @abc.abstractmethod
    async def get(self, key: str) -> str | None:
        """The value under `key`, or None (never set, deleted or expired)."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Forget `key` (nothing happens when it is not there)."""

    @abc.abstractmethod
    async def swap(self, key: str, value: str, ttl: float) -> str | None:
        """Keep `value` under `key` for `ttl` seconds and return what was there (None: nothing), atomically: of
        replicas swapping the same value in, exactly one gets another value back."""

    @abc.abstractmethod
    async def add_member(self, group: str, member: str, ttl: float) -> None:
        """Count `member` in `group` for `ttl` seconds from now (again: from now); the group is kept as long
        as its newest member."""

    @abc.abstractmethod
    async def members(self, group: str) -> list[str]:
        """The members of `group` not expired nor removed, in no particular order."""

    @abc.abstractmethod
    async def remove_member(self, group: str, member: str) -> None:
        """Take `member` out of `group` (nothing happens when it is not there)."""

    @abc.abstractmethod
    async def append(self, stream: str, value: str, keep: int, ttl: float) -> str:
        """Add `value` at the end of `stream`, keeping about its newest `keep` entries, and the stream for `ttl`
        seconds after this append: the entry's id (ids increase along a stream; opaque otherwise)."""

    @abc.abstractmethod
    async def append_many(self, items: Sequence[tuple[str, str]], keep: int, ttl: float) -> list[str]:
        """`append` for each (stream, value) of `items`, in order, in one round trip: the entries' ids."""

    @abc.abstractmethod
    async def read_after(self, stream: str, after: str, wait: float = 0.0) -> list[tuple[str, str]] | None:
        """The entries (id, value) of `stream` after the entry `after`, oldest first; None when `after` is not
        in it (never was, or dropped since). With `wait` (at most 0.5 s), when there is none yet, wait that
        long for one."""

    @abc.abstractmethod
    async def last_entry(self, stream: str) -> str:
        """The id of `stream`'s newest entry, or one before any entry when it has none (or is gone): what
        `read_new` reads after to get only what is appended from now on."""

    @abc.abstractmethod
    async def read_new(self, positions: Mapping[str, str], wait: float = 0.0) -> dict[str, list[tuple[str, str]]]:
        """Several streams at once (`positions`: stream -> the id read last): the entries (id, value) of each
        after that id, oldest first, whether or not that entry is still there; streams with none are left out.
        With `wait` (at most 0.5 s), when there is none yet, wait that long for one."""

    @abc.abstractmethod
    async def publish(self, channel: str, message: str) -> None:
        """Send `message` to every subscriber of `channel`, in this process and (shared stores) in others."""

    @abc.abstractmethod
    def subscribe(self, channel: str) -> AsyncIterator[str]:
        """The messages published to `channel` from now on, in order, until the iterator is closed. When a
        shared store is lost the iterator waits for it to come back and goes on; messages sent meanwhile are
        lost, so it then yields RESYNC (an empty message, which no publisher sends): subscribers that must not
        miss one look at the state again."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Let go of connections."""
