"""Admission controls (seed 000, "Optional admission controls"): per-namespace and per-key rate limits as
token buckets, checked by the engine before a call takes a worker slot.

`limits.rate` in a namespace's `tooldock.yaml` (calls per second, `limits.burst` calls at once, default the
rate rounded up) and `--rate` on an API key. The buckets are in the gateway's state store, shared by its
replicas. A refused call is `RateLimited` (429) with the seconds until a token is back: REST answers
`Retry-After`, MCP an error result, the relay socket -32000.

An admitted call then waits for one of its worker's slots (`limits.concurrency`, else the gateway's
`max_concurrency`): `Slots`.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Literal

from tooldock.errors import RateLimited
from tooldock.state import Store


class Admission:
    """The rate limits' buckets live in the gateway's state store: one bucket per namespace or key for all
    the replicas that share the store (tooldock.state)."""

    def __init__(self, store: Store) -> None:
        self.store = store

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
        wait = await self.store.take_token(f"{what}:{name}", rate, size)
        if wait > 0:
            raise RateLimited(
                f"rate limit of {what} {name!r} reached ({rate:g} calls/s, bursts of {size:g}): retry in {wait:.2f}s",
                {what: name, "retry_after_seconds": round(wait, 3)},
            )


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
