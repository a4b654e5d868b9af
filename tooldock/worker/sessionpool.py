"""Warm in-memory MCP sessions for Context tools, so a call does not pay a session's set-up
(`initialize`, `notifications/initialized`, `logging/setLevel`) each time.

A session serves one call at a time. Its client callbacks (log messages, sampling, elicitation, roots)
are fixed when it opens, so they forward to whichever call holds the session now; sessions are kept per
kind (what the calling client supports and the log level it asked for), since those decide what the
session declared when it opened. A session whose call failed, was cancelled or asked for input is closed
rather than reused: nothing of one call can leak into the next.

Each session is opened and closed by a keeper task of its own: the SDK's session is an anyio context
whose task group must be left by the task that entered it, while calls come from any task.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.client.session import ClientSession

Kind = tuple[bool, bool, bool, str | None]  # sampling, elicitation, roots, log level
IDLE_PER_KIND = 32  # warm sessions kept per kind: enough for the calls a worker typically has in flight


class Pooled:
    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.current: Any = None  # the Relay of the call that holds the session
        self.session: ClientSession | None = None
        self.closing = asyncio.Event()
        self.keeper: asyncio.Task[None] | None = None

    def close(self) -> None:
        self.closing.set()


class SessionPool:
    def __init__(self, opener: Callable[..., contextlib.AbstractAsyncContextManager[ClientSession]]) -> None:
        """`opener(**callbacks)`: an initialized in-memory session with those client callbacks."""
        self._opener = opener
        self._idle: dict[Kind, list[Pooled]] = {}

    async def _open(self, kind: Kind, callbacks: Callable[[Pooled], dict[str, Any]]) -> Pooled:
        pooled = Pooled(kind)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def keep() -> None:
            try:
                async with self._opener(**callbacks(pooled)) as session:
                    if kind[3]:
                        await session.set_logging_level(kind[3])  # type: ignore[arg-type]
                    pooled.session = session
                    ready.set_result(None)
                    await pooled.closing.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
                if isinstance(exc, asyncio.CancelledError):
                    raise
            finally:
                pooled.session = None

        pooled.keeper = asyncio.ensure_future(keep())
        await ready
        return pooled

    @contextlib.asynccontextmanager
    async def lease(
        self, kind: Kind, relay: Any, callbacks: Callable[[Pooled], dict[str, Any]]
    ) -> AsyncIterator[ClientSession]:
        """A session of this kind for one call, back in the pool afterwards if the call ended cleanly."""
        idle = self._idle.setdefault(kind, [])
        while idle and idle[-1].session is None:  # a session that ended by itself
            idle.pop().close()
        pooled = idle.pop() if idle else await self._open(kind, callbacks)
        pooled.current, reusable = relay, False
        try:
            assert pooled.session is not None
            yield pooled.session
            reusable = not getattr(relay, "rounds", None)  # a guard's rounds carry state: never shared
        finally:
            pooled.current = None
            if reusable and pooled.session is not None and len(idle) < IDLE_PER_KIND:
                idle.append(pooled)
            else:
                pooled.close()

    async def close(self) -> None:
        keepers = []
        for sessions in self._idle.values():
            for pooled in sessions:
                pooled.close()
                if pooled.keeper is not None:
                    keepers.append(pooled.keeper)
        self._idle.clear()
        if keepers:
            await asyncio.wait(keepers, timeout=5)
