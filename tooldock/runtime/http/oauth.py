"""OAuth access tokens at the HTTP edge (with TOOLDOCK_OAUTH_ISSUER): the protected resource metadata that
tells clients where to get a token, and the check of a presented token (BearerAuth calls `TokenGate.admit`).

    GET /.well-known/oauth-protected-resource[/mcp | /ns/<namespace>/mcp]   public, RFC 9728
    a request with no credential  -> 401, WWW-Authenticate: Bearer resource_metadata="..."
    a token refused               -> 401 invalid_token (why, never the token), the same header with error=...
    a token that grants nothing   -> 403 insufficient_scope with the scope it needs
    the issuer unreachable        -> 503 issuer_unavailable (retry)

A token's principal is a TokenPrincipal, an ApiKey to every scope check after this. The token goes no
further: the ASGI scope holds its principal (subject, client id, a digest id), and nothing the gateway sends
on, to a worker or an upstream MCP server, is made from the request's Authorization header.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tooldock.errors import (
    InsufficientScope,
    InvalidToken,
    IssuerUnavailable,
    OAuthConfigError,
    ToolDockError,
    Unauthorized,
)
from tooldock.oauth import WELL_KNOWN, OAuthConfig, TokenPrincipal, TokenVerifier, challenge, resource_for
from tooldock.oauth import resource_metadata as metadata_document
from tooldock.runtime.access import audit_refused, key_of
from tooldock.runtime.engine import Engine
from tooldock.runtime.http.responses import error_response
from tooldock.runtime.settings import Settings, SettingsError

Handler = Callable[[str, Scope, Receive, Send], Awaitable[None]]


def token_gate(settings: Settings, url: str) -> TokenGate | None:
    """The gate for `settings.oauth` (None without TOOLDOCK_OAUTH_ISSUER); `url`: the gateway's own, whose
    `/mcp` is the resource unless TOOLDOCK_OAUTH_RESOURCE says otherwise. SettingsError when it cannot be."""
    if settings.oauth is None:
        return None
    try:
        return TokenGate(TokenVerifier(settings.oauth.for_gateway(url)))
    except OAuthConfigError as exc:
        raise SettingsError(str(exc)) from None


def manager_gate(settings: Settings, url: str) -> TokenGate | None:
    """The manager's gate: the same issuer, its own resource (`url` + /mcp unless TOOLDOCK_MANAGER_OAUTH_RESOURCE
    says otherwise); only a token granting unrestricted admin gets in (`admin_refusal`)."""
    if settings.oauth is None:
        return None
    try:
        return TokenGate(TokenVerifier(settings.oauth.for_manager(url)))
    except OAuthConfigError as exc:
        raise SettingsError(str(exc)) from None


class TokenGate:
    def __init__(self, verifier: TokenVerifier) -> None:
        self.verifier = verifier
        self.config: OAuthConfig = verifier.config

    def resource(self, scope: Scope) -> str:
        return resource_for(self.config, scope["path"])

    def unauthorized_headers(self, scope: Scope) -> dict[str, str]:
        """The 401 challenge of a request without a usable credential."""
        return {"WWW-Authenticate": challenge(self.resource(scope))}

    async def admit(self, token: str, scope: Scope, receive: Receive, send: Send) -> TokenPrincipal | None:
        """The token's principal; or None once the refusal was answered."""
        via = f"http {scope.get('method', '')} {scope['path'][:200]}"
        try:
            principal = await self.verifier.verify(token)
        except InvalidToken as err:
            audit_refused("(oauth token)", via, err.message)
            header = challenge(self.resource(scope), "invalid_token", err.message)
            await error_response(err, {"WWW-Authenticate": header})(scope, receive, send)
            return None
        except InsufficientScope as err:
            audit_refused("(oauth token)", via, err.message)
            needed = err.details.get("scope")
            header = challenge(self.resource(scope), "insufficient_scope", err.message, needed)
            await error_response(err, {"WWW-Authenticate": header})(scope, receive, send)
            return None
        except IssuerUnavailable as err:
            audit_refused("(oauth token)", via, err.message)
            await error_response(err)(scope, receive, send)
            return None
        return principal

    def admin_refusal(self, principal: TokenPrincipal, scope: Scope) -> tuple[InsufficientScope, dict[str, str]]:
        """The 403 of a token that does not grant unrestricted admin where that is needed (the manager)."""
        needed = next((g.value for g in self.config.grants if g.scope == "admin" and not g.namespaces), None)
        err = InsufficientScope(
            f"{principal.who()} may not use the manager: that takes a token granting admin on every namespace"
            + (f" (scope {needed})" if needed else ""),
            {"scope": needed} if needed else {},
        )
        return err, {"WWW-Authenticate": challenge(self.resource(scope), "insufficient_scope", err.message, needed)}

    def missing(self, scope: Scope) -> Unauthorized:
        return Unauthorized(
            "missing or invalid bearer token: send 'Authorization: Bearer <token>' with an access token from "
            f"{self.config.issuer} for {self.resource(scope)} (its metadata: {WELL_KNOWN}), or an API key, or the "
            "gateway's bearer token"
        )


class ProtectedResourceMetadata:
    """`GET {WELL_KNOWN}` and `GET {WELL_KNOWN}/<resource path>`, without a credential and readable from any
    origin (browser-based MCP clients fetch it); every other request goes on."""

    def __init__(self, app: ASGIApp, config: OAuthConfig) -> None:
        self.app, self.config = app, config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == WELL_KNOWN or path.startswith(WELL_KNOWN + "/")):
            await self.app(scope, receive, send)
            return
        cors = [(b"access-control-allow-origin", b"*"), (b"access-control-allow-headers", b"mcp-protocol-version")]
        if scope["method"] == "OPTIONS":
            await _answer(send, 204, b"", [*cors, (b"access-control-allow-methods", b"GET, OPTIONS")])
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(
                send,
                405,
                b'{"error": {"code": "method_not_allowed", "message": "GET only"}}',
                [(b"allow", b"GET, OPTIONS"), (b"content-type", b"application/json")],
            )
            return
        document = metadata_document(self.config, resource_for(self.config, path[len(WELL_KNOWN) :]))
        body = json.dumps(document).encode()
        headers = [*cors, (b"content-type", b"application/json"), (b"cache-control", b"public, max-age=300")]
        await _answer(send, 200, body, headers, head=scope["method"] == "HEAD")


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]], head: bool = False) -> None:
    length = (b"content-length", str(len(body)).encode())
    await send({"type": "http.response.start", "status": status, "headers": [*headers, length]})
    await send({"type": "http.response.body", "body": b"" if head else body})


class ScopeChallenge:
    """An MCP endpoint's handler as an OAuth token's caller meets it: a `tools/call` of a tool the token's
    scope does not allow, where a scope the issuer grants would, is answered 403 `insufficient_scope` with
    that scope (the MCP authorization specification's step-up), not a JSON-RPC error inside a 200. Other
    callers and requests go straight on; the body read is handed on unchanged."""

    def __init__(self, engine: Engine, handler: Handler, max_body: int) -> None:
        self.engine, self.handler, self.max_body = engine, handler, max_body

    async def __call__(self, namespace: str, scope: Scope, receive: Receive, send: Send) -> None:
        principal = key_of(scope)
        if not isinstance(principal, TokenPrincipal) or scope.get("method") != "POST":
            await self.handler(namespace, scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more and size <= self.max_body:
            message = await receive()
            if message["type"] != "http.request":
                await self.handler(namespace, scope, _replay([], message, receive), send)
                return
            chunks.append(message.get("body", b""))
            size, more = size + len(chunks[-1]), message.get("more_body", False)
        refusal = self._refusal(namespace, principal, b"".join(chunks) if not more else b"")
        if refusal is not None:
            assert refusal.challenge is not None
            await error_response(refusal, {"WWW-Authenticate": refusal.challenge})(scope, receive, send)
            return
        last = {"type": "http.request", "body": b"".join(chunks), "more_body": more}
        await self.handler(namespace, scope, _replay([], last, receive), send)

    def _refusal(self, namespace: str, principal: TokenPrincipal, body: bytes) -> InsufficientScope | None:
        try:
            message = json.loads(body) if body else None
        except (ValueError, RecursionError):
            return None
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return None
        params = message.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        if not isinstance(tool, str):
            return None
        try:
            self.engine.get_tool(namespace, tool, key=principal)
        except InsufficientScope as err:
            return err if err.challenge is not None else None
        except ToolDockError:
            return None  # the handler answers it as it always does
        return None


def _replay(sent: list[Message], first: Message, receive: Receive) -> Receive:
    """A `receive` that gives `first` once, then the connection's own messages."""

    async def replay() -> Message:
        if not sent:
            sent.append(first)
            return first
        return await receive()

    return replay
