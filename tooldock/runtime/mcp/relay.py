"""The gateway end of a Context tool: what the worker sends during a call goes to the MCP client that
made it, and what the client answers goes back.

Progress becomes `notifications/progress` on the caller's token, log messages become
`notifications/message` (filtered by the level the client set with `logging/setLevel`), and the
worker's `ask` messages become server-to-client requests (`sampling/createMessage`,
`elicitation/create`, `roots/list`) sent in the context of the original request. A client that did
not declare a capability is never asked for it: the tool's question fails as the SDK's client refuses
it ("Elicitation not supported"), or, for a 2026-07-28 client, with MCP's -32021 naming the capability
(worker/direct.py), which reaches the client as that JSON-RPC error when the tool does not catch it.

A 2026-07-28 client has no session to ask over: its questions are answered from the request's recorded
answers, or end the round with an `input_required` result (see inputreq.py).
"""

from __future__ import annotations

from typing import Any

from tooldock.runtime.mcp import inputreq
from tooldock.runtime.mcp.callcontext import of_sdk_request
from tooldock.runtime.mcp.scope import scope_of_request
from tooldock.runtime.mcp.session import SessionState
from tooldock.runtime.mcp.visibility import NOTICES, SessionRules
from tooldock.runtime.questions import CAPABILITIES, ask_session, declared, models, undeclared
from tooldock.worker.protocol import shown_level


class McpRelay:
    def __init__(self, ctx: Any, log_level: str | None, session: SessionState | None = None) -> None:
        self.ctx, self.log_level = ctx, log_level
        self.session_key: Any = None  # whose activation an upstream namespace applies (mcp.server.session_key)
        self.round = inputreq.current.get()  # a 2026-07-28 request's input rounds (set by inputreq.InputRounds)
        self.scope = scope_of_request(ctx)  # whose `ctx.set_state()` the call's is (scope.py)
        # The session's visibility rules and values (visibility.py, session.py); None: a call with no session
        # has none to keep
        self.session = session if self.scope is not None else None

    @property
    def visibility(self) -> SessionRules | None:
        """The session's visibility rules (visibility.py); None for a call with no session."""
        return self.session.visibility if self.session is not None else None

    def call_fields(self) -> dict[str, Any]:
        """What the worker needs to know about the caller: its capabilities, progress, log level, session."""
        session = self.ctx.session
        caps = session.client_capabilities
        can_ask = caps is not None and (self.round is not None or bool(getattr(session, "can_send_request", True)))
        meta = self.ctx.meta
        token = None
        if isinstance(meta, dict):  # the SDK's RequestParamsMeta is a TypedDict with snake_case keys
            token = meta.get("progress_token", meta.get("progressToken"))
        client: dict[str, bool] = {name: can_ask and found for name, found in declared(caps).items()}
        if self.round is not None:  # asked through input_required: an undeclared question is -32021
            client["inputRequired"] = True
        fields = {"client": client, "progress": token is not None, "logLevel": self.log_level, "scope": self.scope}
        fields["request"] = of_sdk_request(self.ctx)  # what the tool reads of its request (callcontext.py)
        if self.session is not None:
            fields.update(self.session.fields())
        return fields

    async def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("op") == "event":
            await self._event(str(message.get("event")), message.get("data") or {})
            return None
        return await self._ask(str(message.get("method")), message.get("params") or {})

    async def _event(self, kind: str, data: dict[str, Any]) -> None:
        session = self.ctx.session
        if kind == "progress":
            await session.report_progress(float(data.get("progress") or 0), data.get("total"), data.get("message"))
        elif kind == "log" and (level := shown_level(data, self.log_level)) is not None:
            await session.send_log_message(
                level, data.get("data"), data.get("logger"), related_request_id=self.ctx.request_id
            )
        elif kind == "visibility" and self.visibility is not None and self.session is not None:
            self.visibility.keep(data)
            self.session.changed()
        elif kind == "state" and self.session is not None:
            self.session.values.keep(data)
            self.session.changed()
        elif kind == "changed" and (notice := NOTICES.get(str(data.get("method")))) is not None:
            await session.send_notification(notice, related_request_id=self.ctx.request_id)

    async def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.round is not None:
            models(method, params)  # only a question a tool may ask
            return await self.round.ask(method, params)
        return await ask_session(self.ctx, method, params)


async def ask_client(ctx: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A guard's question to a 2025-11-25 client, over its session (see inputreq.py): refused when the
    client did not declare the capability it needs."""
    relay = McpRelay(ctx, None)
    relay.round = None
    if not relay.call_fields()["client"].get(CAPABILITIES.get(method, ""), False):
        raise undeclared(method)
    return await relay._ask(method, params)
