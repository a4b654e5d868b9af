"""bench/mcp_raw.py's load generator: its blocking client (1 concurrent) and its asyncio one (more) read the
same answers the same way, JSON or a chunked SSE stream, and both count an answer that is not the call's
result as an error: a wrong id, a wrong result, a refusal."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopbackhttp import LoopbackHttp, serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import mcp_raw

KINDS = ("json", "sse", "wrong id", "wrong result", "refused")
BAD = {"wrong id", "wrong result", "refused"}


class Answering(LoopbackHttp):
    """Answers a tools/call by its id, in turn as each of KINDS, and records which."""

    def __init__(self, given: dict[int, str]) -> None:
        super().__init__()
        self.given = given

    def answer(self, body: bytes) -> bytes:
        request = json.loads(body)
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
    with serving(lambda: Answering(given)) as url:
        yield url, given


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_load_generator_counts_only_the_calls_answered_right(server, concurrency: int) -> None:
    url, given = server
    got = asyncio.run(mcp_raw.measure("target", url, {}, 40, concurrency, 30, modern=True))
    warmup = 20 * concurrency  # ids from 2, the warm-up's first (a barrier holds the measured calls back)
    measured = {rid: kind for rid, kind in given.items() if rid >= 2 + warmup}
    assert len(measured) == 40 == got.calls + got.errors
    assert got.errors == sum(kind in BAD for kind in measured.values()) == 24
    assert len(got.latencies) == got.calls == 16  # the JSON and SSE answers
