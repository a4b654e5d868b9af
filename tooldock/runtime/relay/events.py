"""A Context tool's progress and log messages during a relay call (ToolDock's addition to seed 002), sent on
the caller's connection as JSON-RPC notifications while the call runs, before its answer:

    -> {"jsonrpc": "2.0", "id": 7, "method": "oubliette_call_tool", "params": {"api_key": "tdk_...",
        "tool": "ops_long_task", "arguments": {}, "_meta": {"progressToken": "p1", "tooldock/logLevel": "info"}}}
    <- {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p1", "progress": 1, ...}}
    <- {"jsonrpc": "2.0", "method": "notifications/message",
        "params": {"level": "info", "logger": null, "data": "...", "_meta": {"tooldock/requestId": 7}}}
    <- {"jsonrpc": "2.0", "id": 7, "result": {"content": [...], "isError": false}}

Progress comes only for a `progressToken` (a string or an integer, as in MCP), log messages only with
`tooldock/logLevel` (the lowest level to send, as MCP's `logging/setLevel`). A call that asks for neither
runs as before. `tooldock/capabilities` declares which questions the caller answers (`{"sampling": {},
"elicitation": {}, "roots": {}}`, as MCP's client capabilities; asks.py): a tool asking for one it did not
declare gets fastmcp's "client does not support" error, as from an MCP client that declared none.
"""

from __future__ import annotations

from typing import Any

from tooldock.runtime.questions import CAPABILITIES, dump, question, undeclared
from tooldock.runtime.relay.asks import Questions
from tooldock.runtime.relay.protocol import (
    CAN_ANSWER,
    INVALID_PARAMS,
    LOG_LEVEL,
    MESSAGE,
    PROGRESS,
    REQUEST_OF,
    RpcError,
    Send,
    notification,
)
from tooldock.worker.protocol import LOG_LEVELS, shown_level

ANSWERS = tuple(CAPABILITIES.values())  # what a caller may declare it answers: sampling, elicitation, roots


class SocketEvents:
    """The `relay` the engine hands a call (as runtime.mcp.relay.McpRelay is over MCP)."""

    def __init__(
        self,
        send: Send,
        rid: Any,
        token: str | int | None,
        log_level: str | None,
        answers: frozenset[str] = frozenset(),
        questions: Questions | None = None,
    ) -> None:
        self.send, self.rid, self.token, self.log_level = send, rid, token, log_level
        self.answers = answers if questions is not None else frozenset()
        self.questions = questions
        self._asked: set[str] = set()  # this call's questions waiting for their answers
        self.session_key: Any = None  # the connection, whose toolman_activate state an upstream applies
        self.meta: dict[str, Any] = {}  # the call's `_meta`, which the tool reads (`ctx.request_context.meta`)

    def call_fields(self) -> dict[str, Any]:
        client = {name: name in self.answers for name in ANSWERS}
        fields = {"client": client, "progress": self.token is not None, "logLevel": self.log_level}
        request = {"id": self.rid, "meta": self.meta} if self.meta and isinstance(self.rid, str | int) else {}
        return {**fields, "request": request} if request else fields

    def close(self) -> None:
        """The call ended: its unanswered questions are given up."""
        if self.questions is not None and self._asked:
            self.questions.forget(self._asked, "the call ended before its caller answered")

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("op") != "event":
            return await self._ask(str(message.get("method")), message.get("params") or {})
        kind, data = str(message.get("event")), message.get("data") or {}
        if kind == "progress" and self.token is not None:
            params = {"progressToken": self.token, "progress": data.get("progress") or 0}
            params.update({k: data[k] for k in ("total", "message") if data.get(k) is not None})
            await self.send(notification(PROGRESS, params))
        elif kind == "log" and self.log_level is not None and (level := shown_level(data, self.log_level)):
            params = {"level": level, "logger": data.get("logger"), "data": data.get("data")}
            await self.send(notification(MESSAGE, {**params, "_meta": {REQUEST_OF: self.rid}}))
        return None

    async def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        _, result_model = question(method, params)  # LookupError: not a question a tool may ask
        if CAPABILITIES[method] not in self.answers or self.questions is None:
            raise undeclared(method)
        answer = await self.questions.ask(method, params, self.rid, self._asked)
        return dump(result_model.model_validate(answer))  # an answer that does not fit: an error to the tool


def events_for(
    params: dict[str, Any], send: Send | None, rid: Any, questions: Questions | None = None
) -> SocketEvents | None:
    """What a call's `_meta` asks for (None: nothing); -32602 for a `_meta` it cannot use."""
    meta = params.get("_meta")
    if meta is None or send is None:
        return None
    if not isinstance(meta, dict):
        raise RpcError(INVALID_PARAMS, 'invalid params: "_meta" must be a JSON object')
    token, level = meta.get("progressToken"), meta.get(LOG_LEVEL)
    if token is not None and (isinstance(token, bool) or not isinstance(token, str | int)):
        raise RpcError(INVALID_PARAMS, 'invalid params: "_meta.progressToken" must be a string or an integer')
    if level is not None and level not in LOG_LEVELS:
        raise RpcError(INVALID_PARAMS, f'invalid params: "_meta.{LOG_LEVEL}" must be one of {", ".join(LOG_LEVELS)}')
    declared = meta.get(CAN_ANSWER)
    if declared is not None and not (
        isinstance(declared, dict) and all(isinstance(v, dict) for k, v in declared.items() if k in ANSWERS)
    ):
        raise RpcError(
            INVALID_PARAMS,
            f'invalid params: "_meta.{CAN_ANSWER}" must be an object such as {{"sampling": {{}}, "elicitation": {{}}}}',
        )
    answers = frozenset(name for name in ANSWERS if declared and name in declared)
    if token is None and level is None and not answers:
        return None
    events = SocketEvents(send, rid, token, level, answers, questions)
    events.meta = meta
    return events


async def nowhere(data: bytes) -> None:
    """The `send` of a call that asked to be told nothing (an upstream call that needs only its connection)."""
