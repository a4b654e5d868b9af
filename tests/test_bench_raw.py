"""bench/mcp_raw.py's load generator: its blocking client (1 concurrent) and its asyncio one (more) read the
same answers the same way, JSON or a chunked SSE stream, and both count an answer that is not the call's
result as an error: a wrong id, a wrong result, a refusal."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import mcp_raw

KINDS = ("json", "sse", "wrong id", "wrong result", "refused")
BAD = {"wrong id", "wrong result", "refused"}


class Answering(asyncio.Protocol):
    """HTTP/1.1 keep-alive: answers a tools/call by its id, in turn as each of KINDS, and records which."""

    def __init__(self, given: dict[int, str]) -> None:
        self.given, self.buffer = given, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, rest = self.buffer.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            if len(rest) < length:
                return
            request, self.buffer = json.loads(rest[:length]), rest[length:]
            self.transport.write(self.answer(request))  # type: ignore[attr-defined]

    def answer(self, request: dict) -> bytes:
        rid, x = request["id"], request["params"]["arguments"]["x"]
        kind = self.given[rid] = KINDS[rid % len(KINDS)]
        result = {"content": [], "structuredContent": {"result": x + (kind == "wrong result")}, "isError": False}
        body = json.dumps({"jsonrpc": "2.0", "id": rid + (kind == "wrong id"), "result": result}).encode()
        if kind == "refused":
            return b"HTTP/1.1 401 X\r\ncontent-length: 2\r\n\r\n{}"
        if kind == "sse":
            event = b"event: message\r\ndata: " + body + b"\r\n\r\n"
            half = len(event) // 2  # two chunks, the second split from its size line's end
            return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                    b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, event[:half], len(event) - half, event[half:]))
        return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


@pytest.fixture
def server() -> Iterator[tuple[str, dict[int, str]]]:
    given: dict[int, str] = {}
    loop = asyncio.new_event_loop()
    listening = loop.run_until_complete(loop.create_server(lambda: Answering(given), "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}/mcp", given
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_load_generator_counts_only_the_calls_answered_right(server, concurrency: int) -> None:
    url, given = server
    got = asyncio.run(mcp_raw.measure("target", url, {}, 40, concurrency, 30, modern=True))
    warmup = 20 * concurrency  # ids from 2, the warm-up's first (a barrier holds the measured calls back)
    measured = {rid: kind for rid, kind in given.items() if rid >= 2 + warmup}
    assert len(measured) == 40 == got.calls + got.errors
    assert got.errors == sum(kind in BAD for kind in measured.values()) == 24
    assert len(got.latencies) == got.calls == 16  # the JSON and SSE answers
