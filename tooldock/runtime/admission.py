"""Admission controls (seed 000, "Optional admission controls"): per-namespace and per-key rate limits as
token buckets, checked by the engine before a call takes a worker slot.

`limits.rate` in a namespace's `tooldock.yaml` (calls per second, `limits.burst` calls at once, default the
rate rounded up) and `--rate` on an API key. A refused call is `RateLimited` (429) with the seconds until
a token is back: REST answers `Retry-After`, MCP an error result, the relay socket -32000.

An admitted call then waits for one of its worker's slots (`limits.concurrency`, else the gateway's
`max_concurrency`): `Slots`.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Literal

from tooldock.errors import RateLimited


@dataclass
class Bucket:
    rate: float  # tokens per second
    burst: float  # the most tokens held
    tokens: float
    stamp: float

    def take(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one is there."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class Admission:
    MAX_BUCKETS = 100_000  # keys and namespaces are bounded; this only stops a leak

    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], Bucket] = {}

    def admit(self, what: str, name: str, rate: float | None, burst: float | None = None) -> None:
        """Take one token from `what`/`name`'s bucket (a namespace or a key), or raise RateLimited."""
        if not rate:
            return
        now = time.monotonic()
        size = burst or max(1.0, math.ceil(rate))
        bucket = self._buckets.get((what, name))
        if bucket is None or bucket.rate != rate or bucket.burst != size:  # new, or its limit changed
            if len(self._buckets) >= self.MAX_BUCKETS:
                self._buckets.clear()
            bucket = self._buckets[(what, name)] = Bucket(rate, size, size, now)
        wait = bucket.take(now)
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
