"""Bearer-token authentication for everything but `/health`, as plain ASGI middleware.

Plain ASGI rather than a FastAPI dependency, so it also covers the MCP endpoints the SDK serves.
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from tooldock.errors import Unauthorized
from tooldock.runtime.http.responses import error_response

PUBLIC_PATHS = frozenset({"/health"})


def token_matches(presented: str | None, expected: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), expected.encode())


class BearerAuth:
    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not token_matches(presented.strip(), self.token):
            err = Unauthorized(
                "missing or invalid bearer token: send 'Authorization: Bearer <token>' "
                "(the token is TOOLDOCK_BEARER_TOKEN, or the one printed when the gateway started)"
            )
            await error_response(err, {"WWW-Authenticate": 'Bearer realm="tooldock"'})(scope, receive, send)
            return
        await self.app(scope, receive, send)
