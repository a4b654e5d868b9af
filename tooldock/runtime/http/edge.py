"""The gateway's outermost layer, around every route (REST, OpenAPI, MCP, legacy SSE, the 401s of auth):

- a request id (`X-Request-Id`, see `runtime.requestid`) for each request, echoed in its response;
- a client that goes away mid-request costs one quiet log line, not the "Exception in ASGI application"
  traceback uvicorn would print for Starlette's `ClientDisconnect` (the SDK's own traceback for it too);
- an exception nothing else handled becomes a 500 in ToolDock's error shape with the request id, never a
  traceback in the response; the log gets the traceback, with the request id;
- a 5xx answer is logged with its request id (with the access log off by default, that line is how an
  operator finds it).
"""

from __future__ import annotations

import json
import logging

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tooldock.errors import ToolDockError
from tooldock.runtime import requestid
from tooldock.runtime.http.responses import error_response
from tooldock.runtime.logs import OncePerWindow, filter_once
from tooldock.runtime.observe import tracing

log = logging.getLogger("tooldock.http")
# The SDK logs its own traceback when a client leaves while it reads a POST; this layer says it once, quietly.
_SDK_LOGGERS = ("mcp.server.streamable_http", "mcp.server.sse")
# The SDK's line per request refused for its Host or Origin: one a minute of each kind, with a count.
_PER_REQUEST_LOGGERS = ("mcp.server.transport_security",)


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, ClientDisconnect):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_disconnect(inner) for inner in exc.exceptions)
    return False


def _error_code(body: bytes) -> str:
    """The `error.code` of a ToolDock error body (`code` of a JSON-RPC one), for the log line; else ""."""
    try:
        error = json.loads(body[:65536]).get("error")
    except (ValueError, AttributeError, RecursionError):
        return "-"
    code = error.get("code") if isinstance(error, dict) else None
    return str(code)[:64] if isinstance(code, str | int) else "-"


class DropDisconnects(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and record.exc_info[1] is not None and _is_disconnect(record.exc_info[1]))


class RequestEdge:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        filter_once(DropDisconnects, *_SDK_LOGGERS)
        filter_once(OncePerWindow, *_PER_REQUEST_LOGGERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        presented = None
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                presented = value.decode("latin-1")
                break
        rid = requestid.accept(presented)
        scope[requestid.SCOPE_KEY] = rid
        token = requestid.current.set(rid)
        seen = _Exchange(rid, receive, send)
        try:
            with tracing.incoming(scope["headers"]):
                await self.app(scope, seen.receive, seen.send)
        except Exception as exc:
            if _is_disconnect(exc):
                seen.gone = True
            else:
                self._failed(scope, rid, exc)
                if not seen.status:
                    await self._answer_500(scope, rid, receive, send)
                return
        finally:
            requestid.current.reset(token)
        if seen.gone and not (seen.done and seen.status < 500) and scope["method"] != "GET":
            where = f"{scope['method']} {scope['path']}"
            log.info("client disconnected before the answer: %s (request %s)", where, rid, extra={"request_id": rid})
        elif seen.status >= 500:
            where, status = f"{scope['method']} {scope['path']}", f"{seen.status} {seen.code}".rstrip(" -")
            log.warning("%s answered %s (request %s)", where, status, rid, extra={"request_id": rid})

    @staticmethod
    def _failed(scope: Scope, rid: str, exc: Exception) -> None:
        log.error(
            "%s %s: unhandled %s (request %s): %s",
            scope["method"],
            scope["path"],
            type(exc).__name__,
            rid,
            exc,
            exc_info=exc,
            extra={"request_id": rid},
        )

    @staticmethod
    async def _answer_500(scope: Scope, rid: str, receive: Receive, send: Send) -> None:
        err = ToolDockError(
            f"the gateway failed on this request; the gateway's log has the details under request id {rid}",
            {"request_id": rid},
        )
        try:
            await error_response(err, {"X-Request-Id": rid})(scope, receive, send)
        except (OSError, RuntimeError):  # the client is gone too
            pass


class _Exchange:
    """One request's way through the edge: its `receive` and `send`, and what they saw (a slotted object
    rather than closures over a dict: this layer runs for every request)."""

    __slots__ = ("_receive", "_send", "code", "done", "gone", "rid", "status")

    def __init__(self, rid: str, receive: Receive, send: Send) -> None:
        self.rid, self._receive, self._send = rid, receive, send
        self.status, self.done, self.gone, self.code = 0, False, False, ""

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self.gone = True
        return message

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != b"x-request-id"]
            message = {**message, "headers": [*headers, (b"x-request-id", self.rid.encode())]}
        elif kind == "http.response.body":
            if self.status >= 500 and not self.code:
                self.code = _error_code(message.get("body") or b"")
            self.done = self.done or not message.get("more_body", False)
        await self._send(message)
