"""A relay call's questions to its caller (ToolDock's addition to seed 002): a Context tool's sampling,
elicitation and roots requests, for a call whose `_meta` declared them (`tooldock/capabilities`, as an MCP
client declares its capabilities). Each is sent on the caller's connection as a JSON-RPC request with an id
of the gateway's own (`tooldock-ask-N`), its `_meta` naming the call; the caller sends back a JSON-RPC
answer with that id, which goes to the tool:

    <- {"jsonrpc": "2.0", "id": "tooldock-ask-1", "method": "elicitation/create",
        "params": {"message": "...", "requestedSchema": {...}, "_meta": {"tooldock/requestId": 7}}}
    -> {"jsonrpc": "2.0", "id": "tooldock-ask-1", "result": {"action": "accept", "content": {...}}}

An error answer reaches the tool as the MCP error it would get from an MCP client. A question left
unanswered ends with the call (its time limit) or the connection.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from mcp.shared.exceptions import MCPError

from tooldock.runtime.relay.protocol import REQUEST_OF, Send, encode

ASK_PREFIX = "tooldock-ask-"


class Questions:
    """One connection's questions in flight, matched with the answers its caller sends back."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def ask(self, method: str, params: dict[str, Any], rid: Any, asked: set[str]) -> dict[str, Any]:
        """Put one question to the caller and wait for its answer; `asked` holds its id meanwhile (so the
        call can give up on it: `forget`)."""
        qid = f"{ASK_PREFIX}{next(self._ids)}"
        waiting = self._waiting[qid] = asyncio.get_running_loop().create_future()
        asked.add(qid)
        meta = {**(params.get("_meta") or {}), REQUEST_OF: rid}
        try:
            await self.send(
                encode({"jsonrpc": "2.0", "id": qid, "method": method, "params": {**params, "_meta": meta}})
            )
            return await waiting
        finally:
            asked.discard(qid)
            self._waiting.pop(qid, None)

    def answered(self, message: Any) -> bool:
        """True when `message` is an answer (a JSON-RPC response, to a question of ours or not): it is taken
        here and never answered itself."""
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return False
        if "result" not in message and "error" not in message:
            return False
        waiting = self._waiting.get(message["id"]) if isinstance(message["id"], str) else None
        if waiting is None or waiting.done():
            return True  # not (or no longer) asked: nothing waits for it
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else None
            waiting.set_exception(
                MCPError(code if isinstance(code, int) else -32603, str(text or "the caller refused the question"))
            )
        else:
            found = message.get("result")
            waiting.set_result(found if isinstance(found, dict) else {})
        return True

    def forget(self, asked: set[str], why: str) -> None:
        """The questions in `asked` get no answer any more (their call ended, or the connection did)."""
        for qid in list(asked):
            waiting = self._waiting.pop(qid, None)
            if waiting is not None and not waiting.done():
                waiting.set_exception(ConnectionError(why))

    def close(self) -> None:
        self.forget(set(self._waiting), "the caller's connection closed before it answered")
