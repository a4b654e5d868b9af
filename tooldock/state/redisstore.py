"""The state on a Redis server that every gateway replica shares (redis-py's asyncio client, hiredis's parser).

Every command has a time limit (`TIMEOUT`) and is not retried here: a Redis that does not answer is
`StateUnavailable` within about a second, and the next command connects again, so a Redis that comes back
is used again without a restart. Keys are prefixed with the deployment's namespace (`tooldock:` by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from tooldock.errors import StateUnavailable
from tooldock.state.base import RESYNC, Store
from tooldock.state.url import StateUrl

log = logging.getLogger("tooldock.state")
TIMEOUT = 1.0  # seconds a command (or a connect) may take before the store counts as unreachable
ENTRY_ID = re.compile(r"\d{1,20}-\d{1,20}")  # a Redis stream entry's id
RESUBSCRIBE = 0.5  # seconds between a lost subscription's attempts to come back

# One token bucket, atomic in Redis, on Redis's clock (replicas' clocks may differ): full when new or when
# its rate or burst changed; it expires once it would be full again. Takes up to ARGV[3] tokens. Returns the
# tokens taken and the wait as text (a Lua number would come back as an integer).
TAKE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local rate, burst, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local held = redis.call('HMGET', KEYS[1], 'tokens', 'stamp', 'rate', 'burst')
local tokens, stamp = tonumber(held[1]), tonumber(held[2])
if tokens == nil or held[3] ~= ARGV[1] or held[4] ~= ARGV[2] then
  tokens, stamp = burst, now
end
tokens = math.min(burst, tokens + math.max(0, now - stamp) * rate)
local wait, taken = 0, 0
if tokens >= 1 then
  taken = math.min(want, math.floor(tokens))
  tokens = tokens - taken
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now), 'rate', ARGV[1], 'burst', ARGV[2])
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {tostring(taken), tostring(wait)}
"""

# A group's members (add_member): a sorted set scored by when each expires, in milliseconds on Redis's clock;
# the set is kept as long as its newest member.
ADD = """
local now = redis.call('TIME')
local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at)
redis.call('ZADD', KEYS[1], at + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
return 1
"""
MEMBERS = """
local now = redis.call('TIME')
local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. at, '+inf')
"""


class RedisStore(Store):
    kind, shared = "redis", True

    def __init__(self, url: StateUrl, namespace: str = "tooldock") -> None:
        self.url, self.prefix = url, f"{namespace}:"
        self.client: Any = redis.Redis.from_url(
            url.url,
            socket_timeout=TIMEOUT,
            socket_connect_timeout=TIMEOUT,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
            decode_responses=True,
        )
        self._take = self.client.register_script(TAKE)
        self._add, self._members = self.client.register_script(ADD), self.client.register_script(MEMBERS)

    def describe(self) -> str:
        return f"Redis at {self.url}"

    def _unavailable(self, exc: BaseException) -> StateUnavailable:
        # redis-py's messages name the host and port, never the password; the URL shown has none either.
        return StateUnavailable(
            f"the state store (Redis at {self.url}) did not answer: {type(exc).__name__}: {exc}; retry shortly",
            {"store": str(self.url), "retry_after_seconds": 1},
        )

    async def _run(self, call: Any) -> Any:
        try:
            return await asyncio.wait_for(call, TIMEOUT * 2)  # a hard bound over the socket's own limits
        except (TimeoutError, RedisError, OSError) as exc:
            raise self._unavailable(exc) from None

    async def check(self) -> None:
        await self._run(self.client.ping())

    async def take_tokens(self, bucket: str, rate: float, burst: float, want: int) -> tuple[int, float]:
        key = f"{self.prefix}bucket:{bucket}"
        taken, wait = await self._run(self._take(keys=[key], args=[repr(rate), repr(burst), str(max(1, want))]))
        return int(float(taken)), float(wait)

    async def put(self, key: str, value: str, ttl: float) -> None:
        await self._run(self.client.set(f"{self.prefix}{key}", value, px=max(1, int(ttl * 1000))))

    async def get(self, key: str) -> str | None:
        found = await self._run(self.client.get(f"{self.prefix}{key}"))
        return None if found is None else str(found)

    async def delete(self, key: str) -> None:
        await self._run(self.client.delete(f"{self.prefix}{key}"))

    async def swap(self, key: str, value: str, ttl: float) -> str | None:
        found = await self._run(self.client.set(f"{self.prefix}{key}", value, px=max(1, int(ttl * 1000)), get=True))
        return None if found is None else str(found)

    async def add_member(self, group: str, member: str, ttl: float) -> None:
        """A sorted set scored by when each member expires (on Redis's clock, as the buckets)."""
        key = f"{self.prefix}group:{group}"
        await self._run(self._add(keys=[key], args=[member, str(max(1, int(ttl * 1000)))]))

    async def members(self, group: str) -> list[str]:
        key = f"{self.prefix}group:{group}"
        return [str(m) for m in await self._run(self._members(keys=[key]))]

    async def remove_member(self, group: str, member: str) -> None:
        await self._run(self.client.zrem(f"{self.prefix}group:{group}", member))

    async def append_many(self, items: Sequence[tuple[str, str]], keep: int, ttl: float) -> list[str]:
        if not items:
            return []
        pipe = self.client.pipeline(transaction=False)  # one round trip
        for stream, value in items:
            key = f"{self.prefix}stream:{stream}"
            pipe.xadd(key, {"v": value}, maxlen=max(1, keep), approximate=True)
            pipe.pexpire(key, max(1, int(ttl * 1000)))
        found = await self._run(pipe.execute())
        return [str(entry) for entry in found[::2]]

    async def append(self, stream: str, value: str, keep: int, ttl: float) -> str:
        key = f"{self.prefix}stream:{stream}"
        pipe = self.client.pipeline(transaction=False)  # one round trip
        pipe.xadd(key, {"v": value}, maxlen=max(1, keep), approximate=True)
        pipe.pexpire(key, max(1, int(ttl * 1000)))
        entry, _ = await self._run(pipe.execute())
        return str(entry)

    async def read_after(self, stream: str, after: str, wait: float = 0.0) -> list[tuple[str, str]] | None:
        if not ENTRY_ID.fullmatch(after):  # not an id Redis gave: not one of this stream's
            return None
        key = f"{self.prefix}stream:{stream}"
        pipe = self.client.pipeline(transaction=False)
        pipe.xrange(key, after, after)  # is `after` there at all
        pipe.xrange(key, f"({after}", "+")
        there, later = await self._run(pipe.execute())
        if not there:
            return None
        if not later and wait > 0:  # XREAD BLOCK, within the socket's time limit
            found = await self._run(self.client.xread({key: after}, count=100, block=int(min(wait, 0.5) * 1000)))
            later = found[0][1] if found else []
        return [(str(entry), str(fields.get("v", ""))) for entry, fields in later]

    async def last_entry(self, stream: str) -> str:
        found = await self._run(self.client.xrevrange(f"{self.prefix}stream:{stream}", "+", "-", count=1))
        return str(found[0][0]) if found else "0-0"

    async def read_new(self, positions: Mapping[str, str], wait: float = 0.0) -> dict[str, list[tuple[str, str]]]:
        asked = {f"{self.prefix}stream:{s}": a if ENTRY_ID.fullmatch(a) else "0-0" for s, a in positions.items()}
        if not asked:
            return {}
        block = int(min(wait, 0.5) * 1000) if wait > 0 else None  # within the socket's time limit
        found = await self._run(self.client.xread(asked, count=100, block=block))
        cut = len(self.prefix) + len("stream:")
        return {
            str(key)[cut:]: [(str(entry), str(fields.get("v", ""))) for entry, fields in entries]
            for key, entries in found or ()
            if entries
        }

    async def publish(self, channel: str, message: str) -> None:
        await self._run(self.client.publish(f"{self.prefix}{channel}", message))

    async def subscribe(self, channel: str) -> AsyncIterator[str]:
        name, lost = f"{self.prefix}{channel}", False
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(name)
                if lost:  # back after a loss: what was sent meanwhile is gone
                    lost = False
                    yield RESYNC
                while True:  # a bounded wait, so a read never meets the socket's time limit
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=TIMEOUT / 2)
                    if message is not None and message.get("type") == "message":
                        yield str(message["data"])
            except (RedisError, OSError) as exc:
                if not lost:
                    log.warning("state store: the subscription to %s was lost (%s); subscribing again", name, exc)
                lost = True
                await asyncio.sleep(RESUBSCRIBE)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.client.aclose()
