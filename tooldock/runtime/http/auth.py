"""Bearer authentication for everything but `/health`, as plain ASGI middleware (so it also covers the MCP
endpoints the SDK serves).

Two kinds of bearer: TOOLDOCK_BEARER_TOKEN, which may do everything, and API keys (`tdk_...`, made by
`tooldock keys create`), checked against the keys file on every request (`runtime.access.check_key`: a
revoked or expired key fails at once). The checked key goes into the ASGI scope (`runtime.access`), where
the front ends find it and narrow what the caller sees and may call to its scope; as `scope["user"]` it
binds each MCP session to the key that opened it. Every request made with a key is logged with its id.
`admin_only` (the manager): only an admin key without globs gets in.

With `oauth` (TOOLDOCK_OAUTH_ISSUER), any other bearer is taken for an OAuth access token and checked by
runtime.http.oauth's TokenGate: its principal (a TokenPrincipal, an ApiKey to every scope check) then goes the
same way as a key's, and the 401 of a request without a credential points at the protected resource metadata.

An answer that is an event stream (an MCP GET stream, a legacy SSE stream, a call answered as SSE) lives on
after its key was checked: the KeyGuard holds its key, and when the key is revoked or expires the stream is
ended (its last chunk sent, then the connection closed, its handlers told as if the client had left). A
POST's stream first gets ANSWER_GRACE to end on its own: a call's, with the answer of the call the engine
stopped. The client's next request is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tooldock.errors import Forbidden, InvalidApiKey, Unauthorized
from tooldock.keys import KEY_PREFIX, ApiKey, KeyStore
from tooldock.oauth import TokenPrincipal
from tooldock.runtime.access import ASGI_KEY, audit, audit_refused, check_key, touch_later
from tooldock.runtime.disconnect import hang_up
from tooldock.runtime.http.oauth import TokenGate
from tooldock.runtime.http.responses import error_response
from tooldock.runtime.keyguard import Hold, KeyGuard

PUBLIC_PATHS = frozenset({"/health"})
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="tooldock"'}
ANSWER_GRACE = 2.0  # seconds a POST's event stream has to end with its answer once its key is found invalid


def token_matches(presented: str | None, expected: str) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), expected.encode())


class BearerAuth:
    def __init__(
        self,
        app: ASGIApp,
        token: str,
        keys: KeyStore | None = None,
        admin_only: bool = False,
        guard: KeyGuard | None = None,
        oauth: TokenGate | None = None,
    ) -> None:
        """`guard`: the gateway's KeyGuard (one is made for `keys` when none is given); `oauth`: accept the
        issuer's access tokens too."""
        self.app, self.token, self.keys, self.admin_only, self.oauth = app, token, keys, admin_only, oauth
        self.guard = guard or (KeyGuard(keys) if keys is not None else None)
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
        if scheme.lower() == "bearer" and self.oauth is not None and presented:
            principal = await self.oauth.admit(presented, scope, receive, send)
            if principal is not None:
                await self._serve(principal, scope, receive, send)
            return
        if self.oauth is not None:
            refused = error_response(self.oauth.missing(scope), self.oauth.unauthorized_headers(scope))
            await refused(scope, receive, send)
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
            key: ApiKey = await check_key(self.keys, presented)
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
        touch_later(self.keys, key, self._touching)  # last used, once a minute at most
        await self._serve(key, scope, receive, send)

    async def _serve(self, key: ApiKey, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request as `key` (an API key, or an OAuth token's principal)."""
        if self.admin_only and not key.unrestricted:
            audit_refused(key.id, f"http {scope.get('method', '')} {scope['path'][:200]}", "not unrestricted admin")
            if isinstance(key, TokenPrincipal) and self.oauth is not None:  # 403 insufficient_scope: which scope
                err, headers = self.oauth.admin_refusal(key, scope)
                await error_response(err, headers)(scope, receive, send)
                return
            await error_response(Forbidden(f"{key.who()} may not use the manager"))(scope, receive, send)
            return
        scope[ASGI_KEY] = key
        scope["user"] = _principal(key)
        stream = _GuardedStream(self.guard, key, scope, send)
        try:
            await self.app(scope, receive, stream.send)
        finally:
            stream.close()
            audit(key, "http", f"{scope.get('method', '')} {scope['path'][:200]}", str(stream.status or "no answer"))


class _GuardedStream:
    """A keyed request's `send`: notes the status and, when the answer is an event stream, holds its key in
    the KeyGuard until the answer ends; a key found revoked or expired ends the stream (`_end`)."""

    __slots__ = ("_send", "answered", "ended", "guard", "held", "key", "lock", "scope", "status")

    def __init__(self, guard: KeyGuard | None, key: ApiKey, scope: Scope, send: Send) -> None:
        self.guard, self.key, self.scope, self._send = guard, key, scope, send
        self.status, self.ended = 0, False
        self.held: Hold | None = None
        self.lock: asyncio.Lock | None = None  # an event stream's sends and its ending, one at a time
        self.answered: asyncio.Event | None = None  # its last chunk was sent

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            if self.guard is not None and _is_event_stream(message):
                self.lock, self.answered = asyncio.Lock(), asyncio.Event()
                self.held = self.guard.hold(self.key, self._end)
        if self.lock is None:
            await self._send(message)
            return
        async with self.lock:
            if not self.ended:  # after the end, what the handler still sends goes nowhere
                await self._send(message)
                if message["type"] == "http.response.body" and not message.get("more_body", False):
                    self.close()
                    assert self.answered is not None
                    self.answered.set()

    def close(self) -> None:
        if self.held is not None:
            self.held.release()
            self.held = None

    async def _end(self) -> None:
        assert self.lock is not None and self.answered is not None
        if self.scope.get("method") == "POST":  # most likely a call: the engine stops it, and its answer (the
            with contextlib.suppress(TimeoutError):  # reason) is better than a cut stream
                await asyncio.wait_for(self.answered.wait(), ANSWER_GRACE)
            if self.answered.is_set():
                return
        where = f"{self.scope.get('method', '')} {self.scope['path'][:200]}"
        audit_refused(self.key.id, f"http {where}", "revoked or expired while its event stream was open: ended")
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):  # gone already, or not reading
            await asyncio.wait_for(self._last_chunk(), ANSWER_GRACE)
        self.ended = True
        hang_up(self.scope)

    async def _last_chunk(self) -> None:
        assert self.lock is not None
        async with self.lock:
            self.ended = True
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})


def _principal(key: ApiKey) -> AuthenticatedUser:
    """The key as the MCP SDK's transports know a caller (`scope["user"]`): they bind each session to the
    credential that opened it (streamable HTTP and legacy SSE answer any other "session not found"), and the
    lean path applies the same rule. Its id, never the key itself."""
    if isinstance(key, TokenPrincipal):  # the session is its subject's (and client's), whatever token it brings
        return AuthenticatedUser(
            AccessToken(
                token=key.id,
                client_id=key.client_id,
                scopes=[key.scope],
                subject=key.subject,
                claims={"iss": key.issuer},
            )
        )
    return AuthenticatedUser(AccessToken(token=key.id, client_id=f"tooldock-key:{key.id}", scopes=[key.scope]))


def _is_event_stream(start: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.lower().startswith(b"text/event-stream")
        for name, value in start.get("headers") or ()
    )
