"""A keep-alive HTTP/1.1 server on 127.0.0.1 for tests of the benchmarks' load generators: each request's
body goes to `answer`, which returns the whole response; it runs on an event loop in a thread of its own."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator


class LoopbackHttp(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""

    def answer(self, body: bytes) -> bytes:
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if len(rest) < length:
                return
            body, self.buffer = rest[:length], rest[length:]
            self.transport.write(self.answer(body))  # type: ignore[attr-defined]


@contextlib.contextmanager
def serving(protocol: Callable[[], LoopbackHttp]) -> Iterator[str]:
    """The server's URL (`http://127.0.0.1:<port>/mcp`) while it serves."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(protocol, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
