"""HTTP rules of seed 000 ("Streamable HTTP behavior") that the SDK answers differently, checked before a
request reaches it: a POST whose Content-Type is not application/json is 415 (the SDK says 400), and a
GET that does not accept text/event-stream is 406 (the SDK says 400). Everything else (406 for a POST's
Accept, 400 for an unsupported protocol version, 403 for a foreign Origin, 404 for an unknown session) is
the SDK's own answer."""

from __future__ import annotations

import json

from starlette.responses import Response
from starlette.types import Scope


def _header(scope: Scope, name: bytes) -> str:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), "")


def _error(status: int, code: int, message: str) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def precheck(scope: Scope) -> Response | None:
    """The response to send instead of passing the request to the SDK, or None."""
    method = scope["method"]
    if method == "POST":
        content_type = _header(scope, b"content-type").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _error(415, -32600, f"Content-Type must be application/json, got {content_type or 'none'!r}")
    elif method == "GET":
        accept = _header(scope, b"accept").lower()
        if "text/event-stream" not in accept and "*/*" not in accept:
            return _error(406, -32600, "GET /mcp opens an SSE stream: send 'Accept: text/event-stream'")
    return None
