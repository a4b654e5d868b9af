"""The gateway's shared state store (issue 56): what several gateway replicas must see alike.

One interface, `Store`, two implementations chosen by `TOOLDOCK_STATE_URL`: unset, `MemoryStore` (one process,
the embedded default: nothing new to run); `redis://`, `rediss://` or `unix://`, `RedisStore` on a real Redis
server that every replica shares. Nothing outside this package knows which one is in use.

Held in the store so far: the facts, state and SSE events of 2025-era MCP sessions (runtime/mcp/shared*.py,
with the sessions that have a GET stream and each namespace's lists as a reload last told them), the
rate-limit buckets (one bucket per namespace or API key across all replicas) and the reload signal (a
reload on one replica reaches all of them). A store that cannot be reached is
`StateUnavailable` (503, retryable) for what needs it, never a hang: every Redis command has a time limit.
"""

from __future__ import annotations

from tooldock.state.base import RESYNC, Store
from tooldock.state.memory import MemoryStore
from tooldock.state.url import StateUrl, parse_url


def open_store(url: str | None, namespace: str = "tooldock") -> Store:
    """The store `url` (TOOLDOCK_STATE_URL) names: MemoryStore when it is empty. `namespace` prefixes every
    Redis key, so gateways of different deployments may share one server. Connects lazily: `check()` it."""
    if not url:
        return MemoryStore()
    from tooldock.state.redisstore import RedisStore  # redis is imported only when a gateway uses it

    return RedisStore(parse_url(url), namespace)


def replica_name() -> str:
    """This gateway among the replicas sharing a store: host and process id (in /health, /namespaces and the
    reload announcements)."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def check_reachable(url: StateUrl) -> None:
    """Reach the store at `url` once, from outside any event loop (`tooldock serve` before it starts), then
    let go: StateUnavailable names the URL (without its password) and the error."""
    import asyncio

    async def once() -> None:
        store = open_store(url.url)
        try:
            await store.check()
        finally:
            await store.close()

    asyncio.run(once())


__all__ = ["RESYNC", "MemoryStore", "StateUrl", "Store", "check_reachable", "open_store", "parse_url", "replica_name"]
