"""Stopping a gateway without dropping what it serves (issue 56): on SIGTERM a replica drains, then stops.

1. **Draining** (SIGTERM): for TOOLDOCK_SHUTDOWN_GRACE seconds the gateway serves on, but `/health` answers
   503 `{"status": "draining"}` and every answer carries `Connection: close`: a load balancer that checks
   `/health` takes the replica out, and kept-alive connections move to the other replicas.
2. **Stopping**: it stops accepting connections (uvicorn's shutdown) and
   - event streams opened with GET (an MCP session's standalone stream, a legacy SSE stream) get an SSE
     `retry` field and end: the client reconnects, through the balancer, to a replica that serves on (a
     2025-era session is shared through the state store; a legacy SSE session is not, its client starts anew);
   - calls in flight finish (their answers, streamed or not, are complete), for at most
     TOOLDOCK_DRAIN_TIMEOUT seconds; then the event streams still open (a 2026-07-28 `subscriptions/listen`,
     a call past that time) get the same `retry` and end;
3. the lifespan ends (workers stop) and the process exits. A second Ctrl-C stops at once, as uvicorn does.

`Drain` is the ASGI layer that knows the open requests; `DrainingServer` is uvicorn's server with SIGTERM
and SIGINT taken through the steps above. Ctrl-C skips the grace period (a person at a terminal wants the
prompt back; an orchestrator sends SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tooldock.runtime.disconnect import hang_up

log = logging.getLogger("tooldock.http")
RETRY_MS = 500  # what an ended event stream tells its client to wait before it reconnects
_POLL = 0.05  # seconds between looks at the calls in flight while stopping
_SETTLE = 1.0  # seconds at most for the streams of calls that returned to write their results before they are ended


class _Open:
    """One request being answered: its scope and `send`, and whether its answer is an event stream."""

    __slots__ = ("ended", "finished", "scope", "send", "started", "stream")

    def __init__(self, scope: Scope, send: Send) -> None:
        self.scope, self.send = scope, send
        self.stream = self.started = self.finished = self.ended = False


class Drain:
    """The gateway's outer ASGI layer while it runs, and its steps when told to stop."""

    def __init__(self, app: ASGIApp | None = None, calls_in_flight: Callable[[], int] = lambda: 0) -> None:
        self.app, self.calls_in_flight = app, calls_in_flight
        self.draining = False
        self.replica = ""
        self._open: set[_Open] = set()

    def wrap(self, app: ASGIApp, calls_in_flight: Callable[[], int], replica: str) -> Drain:
        self.app, self.calls_in_flight, self.replica = app, calls_in_flight, replica
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.draining and scope["path"] == "/health":
            await _health_draining(send, self.replica)
            return
        request = _Open(scope, send)

        async def answer(message: Message) -> None:
            if request.ended:  # ended by the drain: what the handler still sends goes nowhere
                return
            if message["type"] == "http.response.start":
                request.started = True
                request.stream = _is_event_stream(message)
                if self.draining:
                    message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                request.finished = True
            await send(message)

        self._open.add(request)
        try:
            await self.app(scope, receive, answer)
        finally:
            self._open.discard(request)

    def begin(self) -> None:
        """Step 1: /health says draining, answers close their connections."""
        if not self.draining:
            self.draining = True
            log.warning("draining: /health answers 503; serving on until told to stop")

    async def finish(self, timeout: float) -> None:
        """Step 2, beside uvicorn's shutdown: GET streams end now, the rest once no call is in flight (at most
        `timeout` seconds)."""
        self.begin()
        await self._end([r for r in self._open if r.stream and r.scope.get("method") == "GET"])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and (self.calls_in_flight() > 0 or self._plain_answers_open()):
            await asyncio.sleep(_POLL)
        if self.calls_in_flight() > 0:
            log.warning("stopping with calls still in flight after %.0f s (TOOLDOCK_DRAIN_TIMEOUT)", timeout)
        else:  # a call's stream ends by itself once its result is written, a moment after the call returned
            settle = min(deadline, loop.time() + _SETTLE)
            while loop.time() < settle and any(r.stream and r.scope.get("method") == "POST" for r in self._open):
                await asyncio.sleep(_POLL)
        await self._end([r for r in self._open if r.stream])

    def _plain_answers_open(self) -> bool:
        return any(not r.stream for r in self._open)

    async def _end(self, requests: list[_Open]) -> None:
        for request in requests:
            if request.finished or request.ended:
                continue
            request.ended = True
            with contextlib.suppress(Exception):  # a client gone already, or not reading: it is ended anyway
                await asyncio.wait_for(_last_chunk(request.send), 1.0)
            hang_up(request.scope)


async def _last_chunk(send: Send) -> None:
    # An SSE comment and the `retry` field (https://html.spec.whatwg.org/multipage/server-sent-events.html),
    # then the end of the answer.
    await send({"type": "http.response.body", "body": f": draining\nretry: {RETRY_MS}\n\n".encode(), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _health_draining(send: Send, replica: str) -> None:
    body = json.dumps({"status": "draining", "replica": replica}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 503, "headers": [*headers, (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _is_event_stream(start: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.lower().startswith(b"text/event-stream")
        for name, value in start.get("headers") or ()
    )


class DrainingServer(uvicorn.Server):
    """uvicorn's server, stopping as the module says: SIGTERM waits `grace` seconds (draining) first; both
    signals then stop accepting and run `Drain.finish` while uvicorn waits for the connections to close."""

    def __init__(self, config: uvicorn.Config, drain: Drain, grace: float, timeout: float) -> None:
        super().__init__(config)
        self.drain, self.grace, self.timeout = drain, grace, timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._signalled = False
        self._now = asyncio.Event()  # a second signal: no more grace
        # The SDK's event streams (sse-starlette) would end on uvicorn's exit flag, calls in flight among them;
        # `Drain.finish` ends them instead, each when its turn comes.
        AppStatus.disable_automatic_graceful_drain()

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)
        if self._stopping is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._stopping

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is None:  # not serving yet
            super().handle_exit(sig, frame)
            return
        if self._signalled:  # a second signal: stop now (a second Ctrl-C: uvicorn's force exit)
            super().handle_exit(sig, frame)
            self._loop.call_soon_threadsafe(self._now.set)
            return
        grace = self.grace if sig == signal.SIGTERM else 0.0
        self._signalled = True
        self._loop.call_soon_threadsafe(self._start_stopping, sig, grace)

    def _start_stopping(self, sig: int, grace: float) -> None:
        self._stopping = asyncio.ensure_future(self._stop(sig, grace))

    async def _stop(self, sig: int, grace: float) -> None:
        self.drain.begin()
        if grace > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._now.wait(), grace)
        super().handle_exit(sig, None)  # uvicorn stops accepting and waits for the connections,
        for server in getattr(self, "servers", ()):  # at its next tick: stop accepting first, here and now
            server.close()
        try:
            await self.drain.finish(self.timeout)
        finally:
            AppStatus.should_exit = True  # whatever SDK stream is left ends with the process
