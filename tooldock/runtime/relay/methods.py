"""The relay's two methods (seed 002), each checking the API key first, on every request (no cache):

    oubliette_tools      {api_key}                     -> {"tools": [descriptors, names `<namespace>_<tool>`]}
    oubliette_call_tool  {api_key, tool, arguments}    -> an MCP CallToolResult: {"content", "isError", ...}
    tooldock_watch_tools {api_key}                     -> {"watching": true}; then notifications (watchers.py)

A call's `_meta` may ask for its Context tool's progress and log messages (events.py).

Refusals: -32001 (no key, or an unknown, revoked or expired one), -32002 (a namespace or tool outside the
key's scope), -32602 (bad params, unknown tool), -32000 (the namespace is unavailable, an upstream failed).
A tool that fails is a result with `isError: true`, as on MCP.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from tooldock.errors import (
    BadRequest,
    InvalidApiKey,
    NamespaceNotFound,
    NamespaceUnavailable,
    NotInScope,
    RateLimited,
    ReloadFailed,
    ToolDockError,
    ToolNotFound,
    UpstreamError,
)
from tooldock.keys import ApiKey, KeyStore
from tooldock.runtime import requestid
from tooldock.runtime.access import audit, audit_refused, check_key, touch_later
from tooldock.runtime.engine import Engine
from tooldock.runtime.observe import call_info, tracing
from tooldock.runtime.relay.asks import Questions
from tooldock.runtime.relay.events import SocketEvents, events_for, nowhere
from tooldock.runtime.relay.protocol import (
    CALL,
    INVALID_KEY,
    INVALID_KEY_MESSAGE,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    NOT_ALLOWED,
    NOT_ALLOWED_MESSAGE,
    SERVER_ERROR,
    TOOLS,
    WATCH,
    RpcError,
    Send,
    qualify,
    split,
)
from tooldock.runtime.versions import check_version
from tooldock.upstream.catalog import ACTIVATE

VIA = "relay"
RESULT_FIELDS = ("content", "structuredContent", "isError", "_meta")


class RelayMethods:
    def __init__(self, engine: Engine, keys: KeyStore) -> None:
        self.engine, self.keys = engine, keys
        self._touching: set[asyncio.Task[Any]] = set()

    async def handle(
        self,
        method: str,
        params: dict[str, Any],
        send: Send | None = None,
        rid: Any = None,
        questions: Questions | None = None,
        view: Any = None,
    ) -> dict[str, Any]:
        """`send`, `rid` and `questions`: the caller's connection, the request's id and the connection's
        questions in flight, for a call's notifications and questions. `view`: the connection as upstream
        namespaces know it (its own `toolman_activate` state; None: their defaults)."""
        if method == TOOLS:
            return await self.tools(params, view)
        if method == CALL:
            events = events_for(params, send, rid, questions)
            try:
                return await self.call_tool(params, events, view)
            finally:
                if events is not None:
                    events.close()
        known = f"{TOOLS}, {CALL} and {WATCH}"
        raise RpcError(METHOD_NOT_FOUND, f"method not found: {method[:80]!r}; this socket serves {known}")

    def activates(self, params: dict[str, Any]) -> bool:
        """Whether a call is an upstream namespace's `toolman_activate`, which changes its connection's view."""
        name = params.get("tool")
        parts = split(name) if isinstance(name, str) else None
        return parts is not None and parts[1] == ACTIVATE and self.engine.upstream(parts[0])

    async def _key(self, params: dict[str, Any]) -> ApiKey:
        presented = params.get("api_key")
        if not isinstance(presented, str) or not presented:
            audit_refused(None, VIA, "no api_key")
            raise RpcError(INVALID_KEY, INVALID_KEY_MESSAGE, {"reason": 'params.api_key is missing: send "api_key"'})
        try:
            key = await check_key(self.keys, presented)
        except InvalidApiKey as err:
            audit_refused(err.details.get("key_id"), VIA, err.message)
            raise RpcError(INVALID_KEY, INVALID_KEY_MESSAGE, {"reason": err.message}) from None
        touch_later(self.keys, key, self._touching)  # last used, at most once a minute
        return key

    async def watch(self, params: dict[str, Any]) -> ApiKey:
        """`tooldock_watch_tools`: the key that asks to be told when its tools change (checked, audited)."""
        key = await self._key(params)
        audit(key, VIA, WATCH, "watching")
        return key

    async def tools(self, params: dict[str, Any], view: Any = None) -> dict[str, Any]:
        key = await self._key(params)
        tools = []
        for namespace in self.engine.namespaces(key):
            try:
                listed = self.engine.list_tools(namespace, view, key)
            except ToolDockError:  # gone since the listing: skip it
                continue
            tools += [{**tool, "name": qualify(namespace, str(tool["name"]))} for tool in listed]
        audit(key, VIA, TOOLS, f"{len(tools)} tools")
        return {"tools": tools}

    async def call_tool(
        self, params: dict[str, Any], events: SocketEvents | None = None, view: Any = None
    ) -> dict[str, Any]:
        key = await self._key(params)
        name, arguments = params.get("tool"), params.get("arguments")
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, 'invalid params: "tool" must be a tool name from oubliette_tools')
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, 'invalid params: "arguments" must be a JSON object of argument names')
        parts = split(name)
        if parts is None:
            raise RpcError(
                INVALID_PARAMS, f"unknown tool {name[:200]!r}: relay tool names are <namespace>_<tool> (see {TOOLS})"
            )
        if events is not None and self.engine.plain_tool(parts[0], parts[1]):
            events = None  # nothing to tell: the call goes as one that asked for nothing
        if view is not None and self.engine.upstream(parts[0]):  # whose activation applies: the connection's
            events = events or SocketEvents(nowhere, None, None, None)
            events.session_key = view
        started = time.perf_counter()
        presented = params.get("request_id")
        rid = requestid.accept(presented if isinstance(presented, str) else None)
        token = requestid.current.set(rid)  # named by the worker's lines and the audit log, as over HTTP
        # The caller's trace context, as the HTTP edge takes it from headers (ToolDock's addition to seed 002).
        carrier = [
            (field.encode(), value.encode())
            for field in ("traceparent", "tracestate")
            if isinstance(value := params.get(field), str) and len(value) <= 512 and value.isprintable()
        ]
        try:
            with tracing.incoming(carrier), call_info(front_end="relay"):
                check_version(self.engine, parts[0], parts[1], params.get("_meta"), view, key)  # FastMCP's version=
                result = await self.engine.call_tool(parts[0], parts[1], arguments, relay=events, key=key, session=view)
        except asyncio.CancelledError:  # its client went away
            audit(key, VIA, name, f"cancelled ({_ms(started)}, request {rid})")
            raise
        except ToolDockError as err:
            outcome = _outcome(err)
            audit(key, VIA, name[:200], f"{err.code} ({_ms(started)}, request {rid})")
            if isinstance(outcome, RpcError):
                outcome.data = {**(outcome.data or {}), "request_id": rid}
                raise outcome from None
            return outcome
        finally:
            requestid.current.reset(token)
        audit(key, VIA, name, f"{'tool error' if result.get('isError') else 'ok'} ({_ms(started)}, request {rid})")
        answer = {k: result[k] for k in RESULT_FIELDS if k in result}
        answer.setdefault("content", [])
        answer["isError"] = bool(answer.get("isError"))
        return answer


def _outcome(err: ToolDockError) -> RpcError | dict[str, Any]:
    """A refusal or gateway failure as a JSON-RPC error; a tool's own failure as an `isError` result."""
    if isinstance(err, NotInScope):
        return RpcError(NOT_ALLOWED, NOT_ALLOWED_MESSAGE, {"reason": err.message})
    if isinstance(err, InvalidApiKey):  # revoked or expired while the call ran (the engine stopped it)
        return RpcError(INVALID_KEY, INVALID_KEY_MESSAGE, {"reason": err.message})
    if isinstance(err, ToolNotFound | NamespaceNotFound | BadRequest):
        return RpcError(INVALID_PARAMS, err.message)
    if isinstance(err, NamespaceUnavailable | UpstreamError | ReloadFailed | RateLimited) or type(err) is ToolDockError:
        return RpcError(SERVER_ERROR, f"{err.code}: {err.message}")
    return {
        "content": [{"type": "text", "text": f"{err.code}: {err.message}"}],
        "structuredContent": {"error": err.to_dict()},
        "isError": True,
    }


def _ms(started: float) -> str:
    return f"{(time.perf_counter() - started) * 1000:.0f} ms"
