"""bench/mcp_wrk.py's answer check: wrk's rows count an answer that is not a tool's result as an error.

wrk runs the script's `response` in each thread's Lua state and `done` in another, so a count kept in the
script's locals always read 0 there; this drives wrk against a loopback server whose answers alternate
between a tool's result and a failure, and checks the failures are counted."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

from conftest import require

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import mcp_wrk

GOOD = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"result":1},"isError":false}}'
FAILED = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"result":1},"isError":true}}'
REFUSED = b'{"error":"unauthorized"}'


class Alternating(asyncio.Protocol):
    """HTTP/1.1 keep-alive answers in turn: a result, a result with isError, a 401, and so on."""

    answers = ((200, GOOD), (200, FAILED), (401, REFUSED))

    def __init__(self, served: list[int]) -> None:
        self.served, self.buffer = served, b""

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
            self.buffer = rest[length:]
            status, body = self.answers[len(self.served) % 3]
            self.served.append(status)
            self.transport.write(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"  # type: ignore[attr-defined]
                                 % (status, len(body), body))


def test_wrk_rows_count_answers_that_are_not_results() -> None:
    require("wrk")
    served: list[int] = []
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(lambda: Alternating(served), "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        got = mcp_wrk.run(f"http://127.0.0.1:{port}/mcp", {}, 1, 1, "echo_number")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    assert got["calls"] >= 3
    good = sum(1 for i in range(got["calls"]) if i % 3 == 0)
    assert got["errors"] == got["calls"] - good  # the isError results and the 401s, nothing else
