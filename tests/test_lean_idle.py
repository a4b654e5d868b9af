"""The lean MCP path's share of a session's idle countdown (runtime/mcp/lean.py `_Hold`): it keeps the SDK
transport's rule (the countdown never ends a session while a request is in flight, and restarts from the
last one's end) while moving anyio's deadline only when that rule needs it."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import anyio

from tooldock.runtime.mcp.lean import BOUND_MARGIN, _Hold

IDLE = 3600.0


def _transport(deadline: float) -> SimpleNamespace:
    return SimpleNamespace(idle_scope=anyio.CancelScope(deadline=deadline), _idle_timeout=IDLE, _requests_in_flight=0)


def test_a_short_call_leaves_a_far_countdown_alone_and_it_restarts_after_the_last() -> None:
    async def main() -> None:
        now = asyncio.get_running_loop().time()
        transport = _transport(now + IDLE)
        hold = _Hold(transport, 30.0)
        assert transport._requests_in_flight == 1 and transport.idle_scope.deadline == now + IDLE
        hold.release()
        after = asyncio.get_running_loop().time()
        assert transport._requests_in_flight == 0
        assert after + IDLE <= transport.idle_scope.deadline <= after + IDLE + 1.0
        again = transport.idle_scope.deadline
        _Hold(transport, 30.0).release()  # less than the slack later: not moved again
        assert transport.idle_scope.deadline == again

    asyncio.run(main())


def test_a_call_that_could_outlast_the_countdown_stops_it() -> None:
    async def main() -> None:
        now = asyncio.get_running_loop().time()
        for bound in (None, IDLE):  # a streamed call (no bound), or a timeout beyond what is left
            transport = _transport(now + BOUND_MARGIN + 10)
            hold = _Hold(transport, bound)
            assert transport.idle_scope.deadline == math.inf
            hold.release()
            assert transport.idle_scope.deadline >= now + IDLE

    asyncio.run(main())


def test_the_last_request_to_end_restarts_a_countdown_another_request_stopped() -> None:
    """An SDK request (an open GET stream, say) stops the countdown and ends first: the lean request that
    ends last must start it again, or the session never expires."""

    async def main() -> None:
        now = asyncio.get_running_loop().time()
        transport = _transport(now + IDLE)
        hold = _Hold(transport, 30.0)
        transport._requests_in_flight += 1  # the SDK's request begins...
        transport.idle_scope.deadline = math.inf
        transport._requests_in_flight -= 1  # ...and ends while ours runs (it leaves the countdown stopped)
        hold.release()
        assert transport._requests_in_flight == 0 and transport.idle_scope.deadline != math.inf

    asyncio.run(main())


def test_a_request_still_in_flight_keeps_the_countdown_stopped() -> None:
    async def main() -> None:
        transport = _transport(math.inf)
        transport._requests_in_flight = 1  # an open GET stream
        _Hold(transport, 30.0).release()
        assert transport._requests_in_flight == 1 and transport.idle_scope.deadline == math.inf

    asyncio.run(main())


def test_no_countdown_no_bookkeeping() -> None:
    transport = SimpleNamespace(idle_scope=None, _idle_timeout=None, _requests_in_flight=0)
    _Hold(transport, 30.0).release()
    assert transport._requests_in_flight == 0
