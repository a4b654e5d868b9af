"""`POST /tools/{name}` and `POST /ns/{namespace}/tools/{name}` as a plain ASGI handler, reached before
FastAPI (runtime.app.HotRoutes): the busiest REST route, answered without FastAPI's routing, dependency
injection, response validation and exception layers, which cost more than the call itself.

It answers exactly as the FastAPI route in rest.py does (the same engine calls, the same error bodies and
statuses, the same `{"result": ...}`); `tests/test_gateway_rest.py` and the fuzz test drive both, and
`TOOLDOCK_LEAN_REST=false` sends these requests to the FastAPI route instead.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Receive, Scope, Send

from tooldock.errors import PayloadTooLarge, ToolDockError
from tooldock.runtime import jsonin
from tooldock.runtime.access import key_of
from tooldock.runtime.engine import Engine
from tooldock.runtime.http.responses import error_response
from tooldock.runtime.http.rest import rest_value
from tooldock.runtime.observe import call_info


class RestCall:
    def __init__(self, engine: Engine, max_body: int) -> None:
        self.engine, self.max_body = engine, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send, namespace: str | None, name: str) -> None:
        if namespace is None:
            found = next((v for k, v in scope["headers"] if k == b"x-namespace"), None)
            namespace = found.decode("latin-1") if found is not None else None
        try:
            payload = await self._call(scope, receive, namespace, name)
        except ToolDockError as err:
            await error_response(err)(scope, receive, send)
            return
        if payload is None:
            return  # the client went away
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _call(self, scope: Scope, receive: Receive, namespace: str | None, name: str) -> dict[str, Any] | None:
        key, engine = key_of(scope), self.engine
        client = scope.get("client")
        with call_info(front_end="rest", client=client[0] if client else None):
            try:
                descriptor = engine.get_tool(namespace, name, key=key)
            except ToolDockError as err:
                engine.refused(namespace, name, err, key)
                raise
            chunks, size = [], 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                if size > self.max_body:
                    raise PayloadTooLarge(
                        f"request body is larger than {self.max_body} bytes (TOOLDOCK_MAX_BODY_BYTES)"
                    )
                if not message.get("more_body"):
                    break
            body = b"".join(chunks)
            arguments = jsonin.loads(body) if body.strip() else {}
            traceback = any(k == b"x-tooldock-traceback" and v == b"1" for k, v in scope["headers"])
            result = await engine.call_tool(namespace, name, arguments, traceback=traceback, key=key)
        return {"result": rest_value(result, descriptor)}
