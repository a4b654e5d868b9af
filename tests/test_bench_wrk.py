"""bench/mcp_wrk.py's answer check: wrk's rows count an answer that is not a tool's result as an error.

wrk runs the script's `response` in each thread's Lua state and `done` in another, so a count kept in the
script's locals always read 0 there; this drives wrk against a loopback server whose answers alternate
between a tool's result and a failure, and checks the failures are counted."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import require
from loopbackhttp import LoopbackHttp, serving

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import mcp_wrk

GOOD = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"result":1},"isError":false}}'
FAILED = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"result":1},"isError":true}}'
REFUSED = b'{"error":"unauthorized"}'


class Alternating(LoopbackHttp):
    """Answers in turn: a result, a result with isError, a 401, and so on."""

    answers = ((200, GOOD), (200, FAILED), (401, REFUSED))

    def __init__(self, served: list[int]) -> None:
        super().__init__()
        self.served = served

    def answer(self, body: bytes) -> bytes:
        status, answer = self.answers[len(self.served) % 3]
        self.served.append(status)
        return b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
            status, len(answer), answer)


def test_wrk_rows_count_answers_that_are_not_results() -> None:
    require("wrk")
    served: list[int] = []
    with serving(lambda: Alternating(served)) as url:
        got = mcp_wrk.run(url, {}, 1, 1, "echo_number")
    assert got["calls"] >= 3
    good = sum(1 for i in range(got["calls"]) if i % 3 == 0)
    assert got["errors"] == got["calls"] - good  # the isError results and the 401s, nothing else
