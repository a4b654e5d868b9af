"""How a call reaches a supervised worker (`supervisor.SupervisedWorker`): wake it if it sleeps, wait for it
while it starts or restarts, count it in flight while it runs.

A call that finds its worker not ready waits for the first of three things:

- the worker is ready: the call goes to it;
- the worker is retired (a reload, a stuck worker's replacement, or the worker owner of `serve --replicas N`
  started again with new workers, swapped the namespace to another worker and stopped this one): the call
  raises `WorkerRetired` at once, and the engine sends it to the namespace's new worker (`engine._run`);
- READY_WAIT_MAX seconds (or the call's own time limit if shorter) pass: a retryable 503
  (`NamespaceUnavailable`, "retry shortly").
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from tooldock.errors import NamespaceUnavailable, WorkerRetired

if TYPE_CHECKING:
    from tooldock.runtime.backend import WorkerState
    from tooldock.runtime.backends.stuck import StuckCheck
    from tooldock.runtime.settings import Settings
    from tooldock.runtime.workerclient import WorkerConnection

READY_WAIT_MAX = 10.0  # a call waits this long at most for a restarting worker, then gets a 503


class WorkerCalls:
    """The calling side of a supervised worker; the supervisor sets the events and fields below."""

    namespace: str
    settings: Settings
    state: WorkerState
    last_error: str | None
    last_wake_ms: float | None
    _conn: WorkerConnection | None
    _ready: asyncio.Event  # set while the worker serves
    _retired: asyncio.Event  # set once the worker is being stopped for good or let go of (never cleared)
    _wake: asyncio.Event  # a sleeping worker (scale to zero) starts when this is set
    _idle: asyncio.Event  # set while no call is in flight
    _inflight: int
    _last_call: float
    _stuck: StuckCheck

    @property
    def _stopping(self) -> bool:
        """No more restarts, no more calls: the worker is being stopped or let go of."""
        return self._retired.is_set()

    @_stopping.setter
    def _stopping(self, value: bool) -> None:
        if value:
            self._retired.set()  # what wakes the calls waiting for this worker (they go to its successor)
        else:
            self._retired.clear()

    async def call(self, tool: str, arguments: dict[str, Any], relay: Any = None) -> dict[str, Any]:
        """Run one tool. A `relay` (see `runtime.mcp.relay`) carries a Context tool's messages to the caller."""
        fields: dict[str, Any] = {"tool": tool, "arguments": arguments}
        if relay is not None:
            fields.update(relay.call_fields(), on_message=relay.handle)
        return await self.request("tools.call", **fields)

    async def request(self, op: str, **fields: Any) -> Any:
        """Any worker-protocol request, once the worker is ready (waking it if it sleeps)."""
        if self._stopping:
            raise WorkerRetired(f"namespace {self.namespace!r}: this worker is being replaced")
        if self.state in ("failed", "crash_loop", "stopped"):
            raise NamespaceUnavailable(
                f"namespace {self.namespace!r} is not running ({self.state}): {self.last_error}",
                {"state": self.state},
            )
        if self.state == "sleeping":
            woken = self._last_call = time.monotonic()
            self._wake.set()
            await self._until_ready(self.settings.call_timeout, "did not wake up in time")
            self.last_wake_ms = round((time.monotonic() - woken) * 1000, 1)
        conn = await self._connection(min(self.settings.call_timeout, READY_WAIT_MAX))
        self._inflight += 1
        self._idle.clear()
        self._last_call = time.monotonic()
        try:
            return await conn.request(op, **fields)
        except asyncio.CancelledError:  # the caller gave up: the worker is told, and checked (stuck.py)
            self._stuck.suspect()
            raise
        finally:
            self._inflight -= 1
            self._last_call = time.monotonic()
            if self._inflight == 0:
                self._idle.set()

    async def _connection(self, bound: float) -> WorkerConnection:
        """The worker's live connection, waiting up to `bound` seconds for one. A connection that has just
        closed (the worker died; its supervisor has not cleared `_ready` yet) is waited past, as nothing was
        sent on it: the call goes to the worker's restart or successor, or fails at the bound."""
        deadline = time.monotonic() + bound
        while True:
            conn = self._conn
            if self._ready.is_set() and conn is not None and not conn.closed.is_set():
                return conn
            if self._stopping:
                raise WorkerRetired(f"namespace {self.namespace!r}: this worker is being replaced")
            left = deadline - time.monotonic()
            if left <= 0:
                raise NamespaceUnavailable(f"namespace {self.namespace!r} is {self.state}; retry shortly")
            if self._ready.is_set():
                await asyncio.sleep(min(left, 0.02))  # the supervisor sees the closed connection at once
            else:
                await self._until_ready(left, None)

    async def _until_ready(self, bound: float, late: str | None) -> None:
        """Wait up to `bound` seconds for the worker to be ready; raise WorkerRetired as soon as it is retired
        instead (the engine sends the call to its successor), a 503 when neither happened in time (`late`
        says how, if not "is <state>; retry shortly")."""
        if self._ready.is_set():
            return
        if self._retired.is_set():
            raise WorkerRetired(f"namespace {self.namespace!r}: this worker is being replaced")
        ready = asyncio.ensure_future(self._ready.wait())
        retired = asyncio.ensure_future(self._retired.wait())
        try:
            await asyncio.wait({ready, retired}, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            retired.cancel()
        if self._ready.is_set():
            return
        if self._retired.is_set():
            raise WorkerRetired(f"namespace {self.namespace!r}: this worker is being replaced")
        raise NamespaceUnavailable(f"namespace {self.namespace!r} {late or f'is {self.state}; retry shortly'}")
