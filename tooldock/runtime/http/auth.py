"""Bearer authentication for everything but `/health`, as plain ASGI middleware (so it also covers the MCP
endpoints the SDK serves).

Two kinds of bearer: TOOLDOCK_BEARER_TOKEN, which may do everything, and API keys (`tdk_...`, made by
`tooldock keys create`), checked against the keys file on every request (a revoked or expired key fails at
once). The checked key goes into the ASGI scope (`runtime.access`), where the front ends find it and narrow
what the caller sees and may call to its scope. Every request made with a key is logged with its id.
`admin_only` (the manager): only an admin key without globs gets in.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tooldock.errors import Forbidden, InvalidApiKey, Unauthorized
from tooldock.keys import KEY_PREFIX, ApiKey, KeyStore
from tooldock.runtime.access import ASGI_KEY, audit, audit_refused
from tooldock.runtime.http.responses import error_response

PUBLIC_PATHS = frozenset({"/health"})
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="tooldock"'}


def token_matches(presented: str | None, expected: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), expected.encode())


class BearerAuth:
    def __init__(self, app: ASGIApp, token: str, keys: KeyStore | None = None, admin_only: bool = False) -> None:
        self.app, self.token, self.keys, self.admin_only = app, token, keys, admin_only
        self._touching: set[asyncio.Task[Any]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, presented = header.partition(" ")
        presented = presented.strip()
        if scheme.lower() == "bearer" and token_matches(presented, self.token):
            await self.app(scope, receive, send)
            return
        if scheme.lower() == "bearer" and self.keys is not None and presented.startswith(KEY_PREFIX):
            await self._with_key(presented, scope, receive, send)
            return
        err = Unauthorized(
            "missing or invalid bearer token: send 'Authorization: Bearer <token>' "
            "(the token is TOOLDOCK_BEARER_TOKEN, or the one printed when the gateway started, or an API key "
            "from `tooldock keys create`)"
        )
        await error_response(err, CHALLENGE)(scope, receive, send)

    async def _with_key(self, presented: str, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.keys is not None
        via = f"http {scope.get('method', '')} {scope['path'][:200]}"
        try:
            key: ApiKey = await asyncio.to_thread(self.keys.check, presented)
        except InvalidApiKey as err:
            audit_refused(err.details.get("key_id"), via, err.message)
            await error_response(err, CHALLENGE)(scope, receive, send)
            return
        if self.admin_only and not key.unrestricted:
            audit_refused(key.id, via, "not an unrestricted admin key")
            refused = Forbidden(
                f"API key {key.id} ({key.name!r}, scope {key.scope}) may not use the manager: "
                "that takes an admin key without --namespace or --tool globs (or the bearer token)"
            )
            await error_response(refused)(scope, receive, send)
            return
        task = asyncio.ensure_future(asyncio.to_thread(self.keys.touch, key))  # last used, once a minute at most
        self._touching.add(task)
        task.add_done_callback(self._touching.discard)
        status = {"code": 0}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        scope[ASGI_KEY] = key
        try:
            await self.app(scope, receive, watch)
        finally:
            audit(key, "http", f"{scope.get('method', '')} {scope['path'][:200]}", str(status["code"] or "no answer"))
