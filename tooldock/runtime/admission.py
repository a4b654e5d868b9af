"""Admission controls (seed 000, "Optional admission controls"): per-namespace and per-key rate limits as
token buckets, checked by the engine before a call takes a worker slot.

`limits.rate` in a namespace's `tooldock.yaml` (calls per second, `limits.burst` calls at once, default the
rate rounded up) and `--rate` on an API key. The buckets are in the gateway's state store, shared by its
replicas. A refused call is `RateLimited` (429) with the seconds until a token is back: REST answers
`Retry-After`, MCP an error result, the relay socket -32000.

With a shared store a replica takes tokens ahead, in batches sized to its own recent demand (what it
would use in `HORIZON` seconds, at most a quarter of the bucket), and keeps them `KEPT` seconds: a busy
replica then pays one store round trip per batch, not per call, and an idle one takes one token at a time,
exactly. Tokens are taken from the shared bucket before they are used, so the replicas together never pass
more calls than the bucket allows; tokens a replica took and did not use in time are lost (a little under
the limit at its edge, never over). Measured in bench/replicas.py.

An admitted call then waits for one of its worker's slots (`limits.concurrency`, else the gateway's
`max_concurrency`): `Slots`.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, Literal

from tooldock.errors import RateLimited
from tooldock.state import Store

HORIZON = 0.05  # seconds of this replica's own demand that one batch of tokens covers
KEPT = 0.1  # seconds a replica keeps tokens it took ahead; then they are dropped (the bucket is never overdrawn)
MAX_BATCH = 1000
MAX_RESERVES = 10_000  # buckets with tokens held here (namespaces and keys are bounded; this stops a leak)


class _Reserve:
    """Tokens of one bucket taken ahead by this replica, and how often it has been asking."""

    __slots__ = ("interval", "last", "refill", "tokens", "until")

    def __init__(self) -> None:
        self.tokens, self.until, self.interval, self.last = 0, 0.0, 1.0, 0.0
        self.refill: asyncio.Future[None] | None = None  # a batch being taken: others wait for it


class Admission:
    """The rate limits' buckets live in the gateway's state store: one bucket per namespace or key for all
    the replicas that share the store (tooldock.state)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.batching = store.shared  # a bucket in this process costs nothing to ask: one token at a time
        self._reserves: dict[tuple[str, float, float], _Reserve] = {}

    @staticmethod
    def limited(rate: float | None, key_rate: float | None) -> bool:
        return bool(rate or key_rate)

    async def admit_call(self, namespace: str, rate: float | None, burst: float | None, key: Any) -> None:
        """A call's tokens: its namespace's bucket, then its API key's (`key.id`, `key.rate`), if it has one."""
        await self.admit("namespace", namespace, rate, burst)
        if key is not None and key.rate:
            await self.admit("key", key.id, key.rate)

    async def admit(self, what: str, name: str, rate: float | None, burst: float | None = None) -> None:
        """Take one token from `what`/`name`'s bucket (a namespace or a key), or raise RateLimited (or
        StateUnavailable, when a shared store does not answer)."""
        if not rate:
            return
        size = burst or max(1.0, math.ceil(rate))
        bucket = f"{what}:{name}"
        batched = self.batching
        wait = await (self._take(bucket, rate, size) if batched else self.store.take_token(bucket, rate, size))
        if wait > 0:
            raise RateLimited(
                f"rate limit of {what} {name!r} reached ({rate:g} calls/s, bursts of {size:g}): retry in {wait:.2f}s",
                {what: name, "retry_after_seconds": round(wait, 3)},
            )

    async def _take(self, bucket: str, rate: float, size: float) -> float:
        """One token, from what this replica holds or a new batch: 0.0, or the seconds until one is back."""
        reserve = self._reserves.get((bucket, rate, size))
        if reserve is None:
            if len(self._reserves) >= MAX_RESERVES:
                self._reserves.clear()
            reserve = self._reserves[(bucket, rate, size)] = _Reserve()
        now = time.monotonic()
        reserve.interval = 0.8 * reserve.interval + 0.2 * min(1.0, now - reserve.last)  # between this replica's calls
        reserve.last = now
        while True:
            if reserve.tokens > 0 and time.monotonic() < reserve.until:
                reserve.tokens -= 1
                return 0.0
            if reserve.refill is None:
                break
            await asyncio.shield(reserve.refill)  # a batch is on its way: take from it, or ask again
        want = max(1, min(int(HORIZON / max(reserve.interval, 1e-6)), int(size // 4), MAX_BATCH))
        done = reserve.refill = asyncio.get_running_loop().create_future()
        try:
            taken, wait = await self.store.take_tokens(bucket, rate, size, want)
        finally:
            reserve.refill = None
            done.set_result(None)
        if not taken:
            return wait
        reserve.tokens, reserve.until = taken - 1, time.monotonic() + KEPT
        return 0.0


class Slots(asyncio.Semaphore):
    """A worker's call slots: asyncio's semaphore, whose acquire with a slot free and no one waiting skips
    `locked()` (on Python 3.11 it builds a generator over the waiters on every call: 2% of the gateway's CPU
    for a lean MCP call at 1 concurrent). Otherwise asyncio's own acquire, so waiting, fairness and
    cancellation are asyncio's."""

    async def acquire(self) -> Literal[True]:
        if self._value > 0 and not self._waiters:
            self._value -= 1
            return True
        return await super().acquire()
