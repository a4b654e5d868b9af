"""The state in this process: the embedded default (one gateway, nothing to run beside it)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from tooldock.state.base import Store


@dataclass
class Bucket:
    rate: float  # tokens per second
    burst: float  # the most tokens held
    tokens: float
    stamp: float

    def take(self, now: float, want: int = 1) -> tuple[int, float]:
        """(tokens taken, 0.0), at most `want`; (0, the seconds until one is there) when there is none."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            taken = min(want, int(self.tokens))
            self.tokens -= taken
            return taken, 0.0
        return 0, (1 - self.tokens) / self.rate


@dataclass
class _Stream:
    entries: deque[tuple[str, str]] = field(default_factory=deque)
    expires: float = 0.0
    grew: asyncio.Event = field(default_factory=asyncio.Event)  # set (and replaced) on each append


class MemoryStore(Store):
    kind, shared = "memory", False
    MAX_BUCKETS = 100_000  # keys and namespaces are bounded; this only stops a leak

    def __init__(self) -> None:
        self._buckets: dict[str, Bucket] = {}
        self._subscribers: dict[str, set[asyncio.Queue[str]]] = {}
        self._values: dict[str, tuple[str, float]] = {}  # key -> (value, when it expires on the monotonic clock)
        self._streams: dict[str, _Stream] = {}
        self._groups: dict[str, dict[str, float]] = {}  # group -> member -> when it expires (monotonic clock)
        self._ids = itertools.count(1)

    def describe(self) -> str:
        return "in this process"

    async def check(self) -> None:
        return None

    async def take_tokens(self, name: str, rate: float, burst: float, want: int) -> tuple[int, float]:
        now = time.monotonic()
        bucket = self._buckets.get(name)
        if bucket is None or bucket.rate != rate or bucket.burst != burst:  # new, or its limit changed
            if len(self._buckets) >= self.MAX_BUCKETS:
                self._buckets.clear()
            bucket = self._buckets[name] = Bucket(rate, burst, burst, now)
        return bucket.take(now, want)

    async def put(self, key: str, value: str, ttl: float) -> None:
        if len(self._values) >= self.MAX_BUCKETS:
            now = time.monotonic()
            self._values = {k: v for k, v in self._values.items() if v[1] > now}
        self._values[key] = (value, time.monotonic() + ttl)

    async def get(self, key: str) -> str | None:
        found = self._values.get(key)
        if found is None or found[1] <= time.monotonic():
            self._values.pop(key, None)
            return None
        return found[0]

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)

    async def swap(self, key: str, value: str, ttl: float) -> str | None:
        old = await self.get(key)
        await self.put(key, value, ttl)
        return old

    async def add_member(self, group: str, member: str, ttl: float) -> None:
        now = time.monotonic()
        if group not in self._groups and len(self._groups) >= self.MAX_BUCKETS:
            self._groups = {g: m for g, m in self._groups.items() if any(t > now for t in m.values())}
        held = self._groups.setdefault(group, {})
        if len(held) >= self.MAX_BUCKETS:
            for gone in [m for m, t in held.items() if t <= now]:
                del held[gone]
        held[member] = now + ttl

    async def members(self, group: str) -> list[str]:
        now = time.monotonic()
        return [m for m, t in (self._groups.get(group) or {}).items() if t > now]

    async def remove_member(self, group: str, member: str) -> None:
        self._groups.get(group, {}).pop(member, None)

    async def append_many(self, items: Sequence[tuple[str, str]], keep: int, ttl: float) -> list[str]:
        return [await self.append(stream, value, keep, ttl) for stream, value in items]

    async def append(self, stream: str, value: str, keep: int, ttl: float) -> str:
        now = time.monotonic()
        if len(self._streams) >= self.MAX_BUCKETS:
            self._streams = {k: v for k, v in self._streams.items() if v.expires > now}
        held = self._streams.get(stream)
        if held is None or held.expires <= now:
            gone, held = held, _Stream()
            self._streams[stream] = held
            if gone is not None:  # who waits on it (read_new) looks again
                gone.grew.set()
        entry = f"{next(self._ids)}"
        held.entries.append((entry, value))
        while len(held.entries) > max(1, keep):
            held.entries.popleft()
        held.expires = now + ttl
        held.grew.set()
        held.grew = asyncio.Event()
        return entry

    async def read_after(self, stream: str, after: str, wait: float = 0.0) -> list[tuple[str, str]] | None:
        held = self._streams.get(stream)
        if held is None or held.expires <= time.monotonic():
            return None
        ids = [entry for entry, _ in held.entries]
        if after not in ids:
            return None
        if ids[-1] == after and wait > 0:
            grew = held.grew
            try:
                await asyncio.wait_for(grew.wait(), min(wait, 0.5))
            except TimeoutError:
                return []
            ids = [entry for entry, _ in held.entries]
            if after not in ids:
                return None
        return list(held.entries)[ids.index(after) + 1 :]

    async def last_entry(self, stream: str) -> str:
        held = self._streams.get(stream)
        return held.entries[-1][0] if held is not None and held.entries and held.expires > time.monotonic() else "0"

    def _newer(self, positions: Mapping[str, str]) -> dict[str, list[tuple[str, str]]]:
        found = {}
        for stream, after in positions.items():
            held = self._streams.get(stream)
            since = int(after) if after.isdigit() else 0
            later = [e for e in held.entries if int(e[0]) > since] if held is not None else []
            if later:
                found[stream] = later
        return found

    async def read_new(self, positions: Mapping[str, str], wait: float = 0.0) -> dict[str, list[tuple[str, str]]]:
        found = self._newer(positions)
        if found or wait <= 0:
            return found
        waits = [asyncio.ensure_future(self._streams.setdefault(s, _Stream()).grew.wait()) for s in positions]
        try:
            await asyncio.wait(waits, timeout=min(wait, 0.5), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for each in waits:
                each.cancel()
        return self._newer(positions)

    async def publish(self, channel: str, message: str) -> None:
        for queue in self._subscribers.get(channel, ()):
            queue.put_nowait(message)

    async def subscribe(self, channel: str) -> AsyncIterator[str]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.setdefault(channel, set()).add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers[channel].discard(queue)

    async def close(self) -> None:
        self._buckets.clear()
        self._values.clear()
        self._streams.clear()
        self._groups.clear()
