"""The lean MCP path: `tools/call` of a plain tool, `tools/list` and `ping` on an established streamable
HTTP session, answered as one JSON response without the SDK's per-message machinery (pydantic models in and
out, memory streams between the HTTP task and the session task, an SSE stream per request).

Hand-written on purpose, and narrow: it serves only what has one obvious answer, and hands everything else
to the SDK, unread or with the body replayed. A request is taken here only when
- it is a POST on a session the SDK opened and still holds, whose list or call the SDK has served once (so
  ToolDock knows it for change notices and the audit log), with no owner check in play;
- its headers are what the SDK would accept (protocol version of the session era, JSON content type, an
  Accept for JSON and SSE, and the SDK's own DNS-rebinding checks);
- the body is a single JSON-RPC request for one of the three methods, with nothing the SDK would have to
  act on (pagination cursors, task augmentation, other parameters), and for `tools/call` a tool that takes
  no fastmcp `Context` (it sends no progress, logs or client requests, so JSON carries all of it).
The answers are the SDK's: the same result objects, the same JSON-RPC errors, -32800 for a request the
client cancelled with `notifications/cancelled` (taken here for the calls this path runs).

A `tools/call` of a tool that takes a Context is taken too: it is answered as one SSE stream, as the SDK
answers it, with the tool's notifications and its questions to the client (sampling, elicitation, roots)
before the response (leanstream.py); the client's answers to those questions, POSTed back, are taken here.
So is a call of an upstream namespace's tool (its server may send progress, log lines and questions too),
with the session's own view of the namespace (its `toolman_activate` state); `toolman_activate` itself,
which tells the session its lists changed, goes to the SDK.

2026-07-28 requests have no session: `tools/call` of a plain tool and `tools/list` are taken by the rules
of leanmodern.py. `served` counts the requests answered here, by method and protocol version (the metric
`tooldock_mcp_lean_requests_total`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from tooldock.runtime.access import key_of
from tooldock.runtime.disconnect import cancelled_on_disconnect
from tooldock.runtime.engine import Engine
from tooldock.runtime.mcp.callcontext import request_fields
from tooldock.runtime.mcp.caller import caller_of
from tooldock.runtime.mcp.compat import Body
from tooldock.runtime.mcp.leanmodern import MODERN, PARAM_PREFIX, ROUTING, ModernLean
from tooldock.runtime.mcp.leanmodern import answer as modern_answer
from tooldock.runtime.mcp.leanrun import STREAMED, method_of, run
from tooldock.runtime.mcp.leanstream import Asks, SseAnswer, StreamRelay
from tooldock.upstream.catalog import ACTIVATE
from tooldock.worker import protocol

log = logging.getLogger("tooldock.mcp")
SESSION = b"mcp-session-id"
METHODS = ("tools/call", "tools/list", "ping")
CANCELLED = "notifications/cancelled"
REQUEST_CANCELLED = -32800
CANCEL_ANSWER = {"code": REQUEST_CANCELLED, "message": "Request cancelled"}  # the SDK's, for the 2025 era
PASSED_LIMIT = 1024  # Host and Origin pairs remembered as accepted (more are checked every time)
KNOWN_LIMIT = 100_000  # sessions remembered; the oldest are forgotten first (they fall back to the SDK)
BOUND_MARGIN = 60.0  # seconds a plain call's answer may take beyond its timeout (it is one write)


async def _answer(send: Send, sid: bytes, status: int, payload: dict[str, Any] | None) -> None:
    body = protocol.dump(payload) if payload is not None else b""
    headers = [(SESSION, sid), (b"content-length", str(len(body)).encode())]
    if payload is not None:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Hold:
    """A request in flight on a session: its idle countdown stops until the last one is done (the SDK
    transport's own bookkeeping, `StreamableHTTPServerTransport.handle_request`), done more cheaply where
    no client can tell (moving anyio's deadline, twice a request, was 4% of a lean call at 1 concurrent):
    - a request that cannot outlast the countdown (its call's timeout, `bound`, ends well before it) leaves
      the countdown running instead of stopping it;
    - the last request to end restarts the countdown only when it would end sooner than a full idle period
      from now, and then from up to SLACK (a hundredth of it, at most a second) later, so a session expires
      between one idle period and that much more after its last request."""

    SLACK = 1.0

    def __init__(self, transport: Any, bound: float | None) -> None:
        self.transport = transport
        scope = transport.idle_scope
        self.held = scope is not None and getattr(transport, "_idle_timeout", None) is not None
        if self.held:
            transport._requests_in_flight += 1
            now = asyncio.get_running_loop().time()  # anyio's clock on asyncio
            if scope.deadline != math.inf and (bound is None or scope.deadline - now < bound + BOUND_MARGIN):
                scope.deadline = math.inf

    def release(self) -> None:
        if self.held:
            self.held, transport = False, self.transport
            transport._requests_in_flight -= 1
            if not transport._requests_in_flight:
                idle, scope = transport._idle_timeout, transport.idle_scope
                now = asyncio.get_running_loop().time()
                if scope.deadline == math.inf or scope.deadline < now + idle:
                    scope.deadline = now + idle + min(self.SLACK, idle / 100)


class _Call:
    """A call this path runs, in the request's own task (a task of its own per call cost a tenth of the
    path): the client's `notifications/cancelled` cancels that task while the call runs, and the request,
    seeing it was the client's, answers -32800 and goes on; any other cancellation (the server stopping)
    goes on up as before."""

    __slots__ = ("asked", "done", "task")

    def __init__(self) -> None:
        task = asyncio.current_task()
        assert task is not None  # an ASGI request runs in a task
        self.task, self.asked, self.done = task, False, False

    def cancel(self) -> None:
        if not self.done and not self.asked:
            self.asked = True
            self.task.cancel()


class _Known:
    """A session the lean path may serve: the caller fields of its audit lines, its state (the log level it
    set), and the capabilities its client declared (what its Context tools may ask it)."""

    __slots__ = ("caller", "caps", "client", "state")

    def __init__(self, caller: dict[str, Any], state: Any, caps: Any, client: Any = None) -> None:
        self.caller, self.state, self.caps = caller, state, caps
        self.client = client  # its `initialize` params: clientInfo and capabilities, as its tools read them


class LeanPath:
    def __init__(self, engine: Engine, max_body: int, security: TransportSecuritySettings | None) -> None:
        self.engine, self.max_body = engine, max_body
        self._security = TransportSecurityMiddleware(security) if security is not None else None
        self._known: dict[str, _Known] = {}  # session id -> what the lean path knows of it
        self._running: dict[tuple[str, Any], _Call] = {}  # (session, request id) -> its call
        self._asks = Asks()  # streamed calls' questions to their clients, until answered
        self._passed: set[tuple[bytes | None, bytes | None]] = set()  # Host and Origin the SDK's check let in
        self.modern = ModernLean(engine)
        self.served: collections.Counter[tuple[str, str]] = collections.Counter()  # (method, version) -> requests

    def seen(self, ctx: Any, state: Any) -> None:
        """The SDK served a list or call of this session: the lean path may take its next ones. `state`:
        the session's SessionState (server.py), whose `log_level` its Context tools' log messages follow."""
        request = getattr(ctx, "request", None)
        sid = request.headers.get("mcp-session-id") if request is not None else None
        caller = caller_of(ctx)
        if sid and sid not in self._known and caller["protocol"] in HANDSHAKE_PROTOCOL_VERSIONS:
            if len(self._known) >= KNOWN_LIMIT:
                self._known.pop(next(iter(self._known)))
            caps = getattr(getattr(ctx, "session", None), "client_capabilities", None)
            client = getattr(getattr(ctx, "session", None), "client_params", None)
            self._known[sid] = _Known(caller, state, caps, client)

    async def handle(self, namespace: str, manager: Any, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """Answer the request here (None), or give the `receive` the SDK must read it from."""
        if scope["method"] != "POST":
            return receive
        sid_raw = accept = ctype = version = b""
        host = origin = None  # the first of each, as the SDK's check reads them
        routing: dict[str, str] | None = {}  # 2026-07-28's routing headers, each sent once (else None)
        for name, value in scope["headers"]:
            if name == SESSION:
                sid_raw = value
            elif name == b"host":
                host = value if host is None else host
            elif name == b"origin":
                origin = value if origin is None else origin
            elif name == b"accept":
                accept = value
            elif name == b"content-type":
                ctype = value
            elif name.startswith(b"mcp-"):
                if name in ROUTING and routing is not None:
                    key = name.decode("latin-1")
                    routing = None if key in routing else {**routing, key: value.decode("latin-1")}
                elif name.startswith(PARAM_PREFIX):
                    routing = None  # the SDK compares these with the tool's declarations
                if name == b"mcp-protocol-version":
                    version = value
        if not ctype.startswith(b"application/json") or not (
            b"application/json" in accept and b"text/event-stream" in accept
        ):
            return receive
        era = version.decode("latin-1")
        if era in MODERN:
            if routing is None or not await self._secure(scope, host, origin):
                return receive
            return await self._modern(namespace, manager, scope, receive, send, routing)
        sid = sid_raw.decode("latin-1")
        known = self._known.get(sid)
        transport = manager._server_instances.get(sid) if known is not None else None
        if transport is None or known is None:
            self._known.pop(sid, None)
            return receive
        if (
            transport.is_terminated
            or (transport.idle_scope is not None and transport.idle_scope.cancel_called)
            or not _same_owner(manager, sid, scope)
            or (era and era not in HANDSHAKE_PROTOCOL_VERSIONS)
        ):
            return receive
        if not await self._secure(scope, host, origin):
            return receive
        read = await self._read(receive)
        if not isinstance(read, tuple):
            return read
        body, msg = read
        if isinstance(msg, dict) and "method" not in msg and self._asks.answered(sid, msg):
            await _answer(send, sid_raw, 202, None)  # a client's answer to a streamed call's question
            return None
        plan = self._plan(namespace, msg)
        if plan is None or (plan != CANCELLED and known.state.visibility.rules):  # filtered on the SDK's path
            return body.replay()
        # whose view of an upstream namespace this session sees (its `toolman_activate` state: session.py)
        session = known.state.activation if plan != CANCELLED and self.engine.upstream(namespace) else None
        rid = msg.get("id")
        if plan == CANCELLED:
            target = self._running.get((sid, msg["params"]["requestId"]))
            if target is None:
                return body.replay()
            target.cancel()
            await _answer(send, sid_raw, 202, None)
            return None
        caller = {**known.caller, "client": (scope.get("client") or (None,))[0]}
        self.served[method_of(plan), caller["protocol"]] += 1
        params = msg.get("params") or {}
        answer = relay = None
        if plan == STREAMED:
            answer = SseAnswer(send, (SESSION, sid_raw), transport, rid)
            relay = StreamRelay(answer, params, known.state, known.caps, self._asks, sid)
            relay.session_key = session
            meta = params.get("_meta")
            relay.request = request_fields(rid, meta, caller["protocol"], known.client, "streamable-http")
        # the session's idle countdown waits for this request, as the SDK's would; a plain call is bounded by
        # its timeout (a streamed one is not: its client may read slowly)
        idle = _Hold(transport, self.engine.call_timeout(namespace) if answer is None else None)
        call = _Call()
        try:
            if answer is not None:
                await answer.open(caller["protocol"])
            self._running[(sid, rid)] = call
            result = await run(self.engine, namespace, plan, params, key_of(scope), caller, relay, session=session)
            payload = {"jsonrpc": "2.0", "id": rid, **result}
        except asyncio.CancelledError:
            if not call.asked or call.task.uncancel():  # cancelled from outside too (shutdown): pass it on
                if answer is not None:
                    answer.abandon()
                raise
            call.asked = False
            payload = {"jsonrpc": "2.0", "id": rid, "error": dict(CANCEL_ANSWER)}
        finally:
            call.done = True
            self._running.pop((sid, rid), None)
            idle.release()
            if relay is not None:
                relay.close()
        if call.asked:  # the client's cancel came, and the call itself caught it: nothing is cancelled now
            call.task.uncancel()
        if answer is None:
            await _answer(send, sid_raw, 200, payload)
        else:
            await answer.message(payload, last=True)
        return None

    async def _secure(self, scope: Scope, host: bytes | None, origin: bytes | None) -> bool:
        """Whether the SDK's DNS-rebinding check lets this Host and Origin in (if not, the SDK answers)."""
        if self._security is None or (host, origin) in self._passed:
            return True
        if await self._security.validate_request(Request(scope), is_post=True):
            return False  # the SDK answers it (421 / 403 / 400)
        if len(self._passed) < PASSED_LIMIT:  # its verdict depends on these two headers only
            self._passed.add((host, origin))
        return True

    async def _read(self, receive: Receive) -> tuple[Body, Any] | Receive | None:
        """The body and its decoded JSON; else what `handle` returns: None when the client went away, or
        the `receive` replaying what was read (the SDK answers a body over the limit, 413, or not JSON)."""
        body = Body(receive)  # what the lean path does not take, the SDK reads as if it had not been read
        while len(body.data) <= self.max_body and await body.pull():
            pass
        if body.disconnected:
            return None
        if not body.complete or len(body.data) > self.max_body:
            return body.replay()
        try:
            return body, protocol.parse(bytes(body.data))
        except (ValueError, RecursionError):
            return body.replay()

    async def _modern(
        self, namespace: str, manager: Any, scope: Scope, receive: Receive, send: Send, routing: dict[str, str]
    ) -> Receive | None:
        """A 2026-07-28 request (leanmodern.py): no session; a client that goes away cancels the call."""
        read = await self._read(receive)
        if not isinstance(read, tuple):
            return read
        body, msg = read
        route = self.modern.route(namespace, msg, routing)
        if route is None:
            return body.replay()
        self.served[(route.method, route.verdict.protocol_version)] += 1
        caller = route.caller((scope.get("client") or (None,))[0])
        with cancelled_on_disconnect(scope):
            outcome = await run(
                self.engine,
                namespace,
                route.method,
                route.params,
                key_of(scope),
                caller,
                None,
                manager.app.server_info_stamp,
            )
        await modern_answer(send, {"jsonrpc": "2.0", "id": route.rid, **outcome})
        return None

    def _plan(self, namespace: str, msg: Any) -> str | None:
        """The method this path serves for `msg`, or None for the SDK."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return None
        method, params = msg.get("method"), msg.get("params")
        if method == CANCELLED and "id" not in msg and isinstance(params, dict):
            target = params.get("requestId")
            return CANCELLED if isinstance(target, (str, int)) and not isinstance(target, bool) else None
        rid = msg.get("id")
        if method not in METHODS or not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return None
        if params is not None and not isinstance(params, dict):
            return None
        params = params or {}
        entry = self.engine.registry.snapshot.entries.get(namespace)
        if entry is None:
            return None
        if method == "tools/call":
            if set(params) - {"name", "arguments", "_meta"} or not isinstance(params.get("arguments", {}), dict):
                return None
            name = params.get("name")
            if not isinstance(name, str):
                return None
            if entry.source.is_upstream:  # its server may send anything on the way; activation tells the session
                return STREAMED if name != ACTIVATE else None
            if not self.engine.plain_tool(namespace, name):
                return STREAMED if self.engine.context_tool(namespace, name) else None
        elif set(params) - {"_meta"}:
            return None  # a cursor, or something newer than this path knows
        return str(method)


def _same_owner(manager: Any, sid: str, scope: Scope) -> bool:
    """Whether the request's credential (an API key's `scope["user"]`, or none for the bearer token) is the
    one that opened the session: the SDK's rule, which answers any other request "session not found"."""
    user = scope.get("user")
    requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    return bool(getattr(manager, "_session_owners", {}).get(sid) == requestor)
