"""The relay socket's questions to a caller (runtime/relay/asks.py), without a gateway: what is taken as an
answer, how answers and refusals reach the question, and what happens to questions nobody will answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tooldock.runtime.relay.asks import Questions


class Caller:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, data: bytes) -> None:
        self.sent.append(json.loads(data))


@pytest.mark.parametrize("message, taken", [
    ({"jsonrpc": "2.0", "id": "x", "result": {}}, True),  # an answer nobody waits for: taken, dropped
    ({"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "no"}}, True),
    ({"jsonrpc": "2.0", "id": 3, "method": "oubliette_tools"}, False),  # a request
    ({"jsonrpc": "2.0", "method": "notifications/x"}, False),
    ({"jsonrpc": "2.0", "id": 3}, False),  # neither: answered as a bad request
    (["not", "a", "message"], False),
])
def test_what_is_taken_as_an_answer(message: Any, taken: bool):
    assert Questions(Caller().send).answered(message) is taken


def test_answers_and_refusals_reach_their_questions():
    async def go() -> None:
        caller = Caller()
        questions = Questions(caller.send)
        asked: set[str] = set()
        first = asyncio.ensure_future(questions.ask("roots/list", {}, 7, asked))
        second = asyncio.ensure_future(questions.ask("elicitation/create", {"message": "?"}, 8, asked))
        await asyncio.sleep(0)
        assert [m["params"]["_meta"] for m in caller.sent] == [{"tooldock/requestId": 7}, {"tooldock/requestId": 8}]
        one, two = (m["id"] for m in caller.sent)
        assert questions.answered({"jsonrpc": "2.0", "id": two, "error": {"code": -1, "message": "closed"}})
        assert questions.answered({"jsonrpc": "2.0", "id": one, "result": {"roots": []}})
        assert await first == {"roots": []}
        with pytest.raises(MCPError, match="closed"):
            await second
        assert asked == set()

    asyncio.run(go())


def test_questions_nobody_will_answer_fail():
    async def go() -> None:
        questions = Questions(Caller().send)
        mine: set[str] = set()
        others: set[str] = set()
        ended = asyncio.ensure_future(questions.ask("roots/list", {}, 1, mine))
        gone = asyncio.ensure_future(questions.ask("roots/list", {}, 2, others))
        await asyncio.sleep(0)
        questions.forget(mine, "the call ended")
        with pytest.raises(ConnectionError, match="the call ended"):
            await ended
        assert not gone.done()
        questions.close()
        with pytest.raises(ConnectionError, match="connection closed"):
            await gone

    asyncio.run(go())
