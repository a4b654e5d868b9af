"""The gateway's HTTP/1.1 connections: uvicorn's httptools protocol, with the writes of one event-loop turn
sent in one system call.

uvicorn writes a response's status line and headers, then its body, as two `transport.write` calls; with
uvloop each is its own `send`, so every answer costs two system calls here, two TCP segments on the wire
and two reads (and wake-ups) at the client. Nearly every answer the gateway gives (a REST result, an MCP
JSON answer, a whole lean SSE stream) is written in one turn, so joining the turn's writes makes each one
system call and one segment. It is the worker protocol's `Outbox` idea applied to HTTP. A whole answer
to the only request in flight goes out as soon as it is complete (uvicorn says so). A streamed answer still
goes out as it is produced: whatever is pending is written at the end of the turn that produced it, and
before the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tooldock.runtime.disconnect import CLOSE_CONNECTION, ON_DISCONNECT


class CoalescingTransport:
    """A transport whose `write`s within one loop turn reach the real transport as one write. Everything
    else (flow control, closing, the peer's address) is the real transport's."""

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(p) for p in self._pending)

    def __getattr__(self, name: str) -> Any:  # is_closing, pause_reading, get_extra_info, set_protocol, ...
        return getattr(self._transport, name)


class GatewayHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol on a CoalescingTransport (`uvicorn.Config(http=GatewayHttpProtocol)`),
    which also tells a request's handlers when its client goes away (ON_DISCONNECT) and lets the gateway
    close a request's connection (CLOSE_CONNECTION: an event stream whose API key was revoked)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]

    def on_headers_complete(self) -> None:
        super().on_headers_complete()  # builds the scope and creates the request's task (not run yet)
        scope = cast(dict[str, Any], self.scope)  # uvicorn's TypedDict names no extra keys
        scope[ON_DISCONNECT] = []
        scope[CLOSE_CONNECTION] = self.transport.close

    def on_response_complete(self) -> None:
        # The answer is whole. When it is the server's only request in flight (its own task is still in
        # `tasks`), it goes out now rather than at the end of the turn: one pass of the event loop sooner for
        # a client calling one request at a time. With more in flight it waits for the turn's end as before,
        # where the answers of many connections go out together and their next requests come back in one
        # poll (writing each at once cost a bare endpoint a quarter of its rate at 16 connections).
        if len(self.tasks) <= 1:
            cast(CoalescingTransport, self.transport).flush()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        cycle = self.cycle
        super().connection_lost(exc)
        if cycle is not None and not cycle.response_complete:
            for hook in list(cast(dict[str, Any], cycle.scope).get(ON_DISCONNECT) or ()):
                hook()
