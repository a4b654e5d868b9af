"""`POST /tools/{name}` and `POST /ns/{namespace}/tools/{name}` as a plain ASGI handler, reached before
FastAPI (runtime.app.HotRoutes): the busiest REST route, answered without FastAPI's routing, dependency
injection, response validation and exception layers, which cost more than the call itself.

The work is the FastAPI route's own (`rest.call_rest`); only the routing and the response are done here,
so the answers are the same: the same error bodies and statuses, the same `{"result": ...}`
(`tests/test_hot_rest.py` compares them; `TOOLDOCK_LEAN_REST=false` sends these requests to FastAPI).
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from tooldock.errors import ToolDockError
from tooldock.runtime.disconnect import cancelled_on_disconnect
from tooldock.runtime.engine import Engine
from tooldock.runtime.http.responses import error_response
from tooldock.runtime.http.rest import call_rest

# FastAPI's JSON (no NaN, UTF-8 as is), built once: `json.dumps` with options builds one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class RestCall:
    def __init__(self, engine: Engine, max_body: int) -> None:
        self.engine, self.max_body = engine, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send, namespace: str | None, name: str) -> None:
        request = Request(scope, receive)
        if namespace is None:
            namespace = request.headers.get("x-namespace")
        try:  # a client that goes away cancels the call (ClientDisconnect, which the edge logs quietly)
            with cancelled_on_disconnect(scope):
                payload = await call_rest(self.engine, self.max_body, namespace, name, request)
        except ToolDockError as err:
            await error_response(err)(scope, receive, send)
            return
        body = _ENCODER.encode(payload).encode()
        headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
