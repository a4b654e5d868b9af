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
from typing import Any

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
