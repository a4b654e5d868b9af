"""Workers that keep running what their callers gave up on.

When a call's caller gives up (its time limit, a client that went away) the gateway sends the worker
`cancel`. An async tool stops there. A sync tool's thread cannot be stopped (Python has no way to), and an
async tool that blocks its event loop (`time.sleep` in an `async def`) keeps the whole worker from
answering: either would hold the namespace, or a thread of it, for as long as the tool runs (an hour,
forever).

So each cancelled call starts a check (one at a time per worker): `after` seconds later the gateway pings
the worker. A worker that does not answer within PING_WAIT (its event loop is blocked), or that reports a
call still running `after` seconds after its cancel (`abandoned` in the ping's answer), is stuck. So is an
idle worker that does not answer the liveness ping sent every `interval` seconds while no call runs (its
loop blocked with nothing in flight: a tool's background task calling blocking code, a deadlock), which
no cancelled call would reveal before the next caller waited out its time limit. A stuck worker's
supervisor replaces it (`SupervisedWorker.stuck`): on the process backend a fresh worker takes new calls at
once while this one finishes what it can, as in a reload; on the docker backend the container is restarted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tooldock.errors import NamespaceUnavailable

if TYPE_CHECKING:
    from tooldock.runtime.backend import WorkerState
    from tooldock.runtime.workerclient import WorkerConnection

PING_WAIT = 3.0  # seconds a worker has to answer `ping` (it answers in well under a millisecond when well)


class StuckCheck:
    def __init__(
        self, ping: Callable[[], Awaitable[Any]], after: float, on_stuck: Callable[[str], Awaitable[None]]
    ) -> None:
        self.ping, self.after, self.on_stuck = ping, after, on_stuck
        self._task: asyncio.Task[None] | None = None

    def suspect(self) -> None:
        """A call was cancelled: look again in `after` seconds (unless a look is already on its way)."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._check(), name="tooldock-stuck-check")

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def liveness(self, interval: float, idle: Callable[[], bool]) -> None:
        """Every `interval` seconds while `idle()` (no call in flight), a ping; until the worker is stuck."""
        while True:
            await asyncio.sleep(interval)
            if not idle() or (self._task is not None and not self._task.done()):
                continue  # a call may be what keeps it busy (its time limit judges it), or a check is on its way
            try:
                async with asyncio.timeout(PING_WAIT):
                    await self.ping()
            except TimeoutError:
                if not idle():  # a call that began meanwhile may be the one blocking: not judged here
                    continue
                await self.on_stuck(
                    f"it did not answer a liveness ping within {PING_WAIT:g}s with no call in flight: its event loop "
                    "is blocked (a tool's background task calling blocking code?)"
                )
                return
            except Exception:  # not connected (restarting, asleep): its supervisor knows
                continue

    async def _check(self) -> None:
        while True:
            await asyncio.sleep(self.after)
            reason = await self._look()
            if reason == "":
                return
            if reason is not None:
                await self.on_stuck(reason)
                return

    async def _look(self) -> str | None:
        """Why the worker is stuck; None: a cancelled call still runs but not for long yet (look again);
        "": nothing is left running (or the worker is gone, which its supervisor sees by itself)."""
        try:
            async with asyncio.timeout(PING_WAIT):
                pong = await self.ping()
        except TimeoutError:
            return (
                f"it did not answer a ping within {PING_WAIT:g}s after a call was cancelled: a tool blocks its "
                "event loop (an async tool calling blocking code?)"
            )
        except Exception:  # not connected (restarting, asleep) or the connection ended: not ours to judge
            return ""
        abandoned = [a for a in (pong or {}).get("abandoned") or [] if isinstance(a, dict)]
        if not abandoned:
            return ""
        oldest = max(abandoned, key=lambda a: _seconds(a))
        if _seconds(oldest) < self.after:
            return None
        why = (
            "it ignored its cancellation" if oldest.get("kind") == "task" else "Python cannot stop a sync tool's thread"
        )
        return f"{str(oldest.get('call'))[:200]!r} still runs {_seconds(oldest):.0f}s after its caller gave up ({why})"


def _seconds(abandoned: dict[str, Any]) -> float:
    with contextlib.suppress(TypeError, ValueError):
        return float(abandoned.get("seconds") or 0)
    return 0.0


class Replacing:
    """What a supervised worker (`supervisor.SupervisedWorker`) does about being stuck: `StuckCheck` judges,
    this replaces it (hot, by the registry, when a second one can run beside it) or restarts it in place."""

    namespace: str
    kind: str
    state: WorkerState
    # Whether a second worker of the same namespace can start beside this one: a stuck worker is then
    # replaced by the registry (`on_stuck`), hot, instead of restarted in place.
    replaceable = False
    on_stuck: Callable[[Any, str], None] | None
    _conn: WorkerConnection | None
    _ready: asyncio.Event
    _idle: asyncio.Event
    _recycle: str | None  # why the running worker is being restarted in place
    _stopping: bool

    def _log_line(self, line: str) -> None:
        raise NotImplementedError  # the supervisor's: with the worker's output

    async def _ping(self) -> Any:
        conn = self._conn
        if conn is None or not self._ready.is_set():
            raise NamespaceUnavailable(f"namespace {self.namespace!r} is {self.state}")
        return await conn.request("ping")

    async def stuck(self, reason: str) -> None:
        """A call runs on after its caller gave up: replace this worker (hot, by the registry, when a second
        one can run beside it) or restart it in place."""
        if self._stopping:
            return
        how = "starting a fresh one" if self.replaceable and self.on_stuck else "restarting it"
        self._log_line(f"[{self.namespace}] the {self.kind} is stuck: {reason}; {how}")
        if self.replaceable and self.on_stuck is not None:
            self.on_stuck(self, reason)
        else:
            await self.restart_in_place(reason)

    async def restart_in_place(self, reason: str) -> None:
        """New calls wait while those in flight get a few seconds to finish; then the worker is stopped and
        started again (a container restarted) by the supervision loop."""
        conn = self._conn
        if self._stopping or conn is None or self._recycle is not None:
            return
        self._recycle = reason
        self._ready.clear()
        self.state = "restarting"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await self._idle.wait()
        await conn.close()

    async def _discard_stuck(self) -> None:
        """After a stuck worker's connection closed: make sure it does not run on (a process was ended by
        `_terminate`; a container is restarted by its backend)."""
