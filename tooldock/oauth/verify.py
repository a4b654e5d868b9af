"""Checks an access token and answers its principal: `await verifier.verify(token, namespace)`.

A JWT access token (RFC 9068) is checked against the issuer's keys: an algorithm of the allow-list (never
`none`, never HMAC), a key the issuer lists, the signature, `iss` (exactly the issuer), `aud` (it must name
this resource: the gateway's MCP endpoint, or one namespace's, `.../ns/<namespace>/mcp`, which narrows the
token to that namespace), `exp` (required) and `nbf`/`iat` with the configured leeway. Anything else is an
opaque token, sent to the issuer's introspection endpoint (RFC 7662; `introspect`) when it has one and the
gateway has a client to ask with.

Verified tokens are remembered by their SHA-256 (never the token itself) until they expire, so a client's
next call costs a dictionary look-up; a key the issuer stops listing forgets what it verified. Every refusal
is `InvalidToken` (401) with the reason, never the token; a token holding none of the grants is
`InsufficientScope` (403).
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from tooldock.errors import InvalidToken
from tooldock.oauth import jws
from tooldock.oauth.config import OAuthConfig
from tooldock.oauth.grants import TokenPrincipal, principal_for
from tooldock.oauth.introspect import Introspection
from tooldock.oauth.issuer import Issuer

MAX_REMEMBERED = 10_000  # verified tokens remembered (least recently used go first)
MAX_TOKEN = 16 * 1024


class TokenVerifier:
    def __init__(self, config: OAuthConfig, issuer: Issuer | None = None) -> None:
        assert config.resource is not None, "OAuthConfig.for_gateway first"
        self.config, self.resource = config, config.resource
        self.issuer = issuer or Issuer(config)
        self.introspection = Introspection(config, self.issuer)
        self.issuer.on_keys.append(self._keys_changed)
        base = self.resource.removesuffix("/mcp") if self.resource.endswith("/mcp") else None
        self._ns_prefix = f"{base}/ns/" if base is not None else None
        # sha256(token) -> (principal, kid or None for an introspected token, monotonic time it is good until)
        self._seen: OrderedDict[bytes, tuple[TokenPrincipal, str | None, float]] = OrderedDict()

    async def close(self) -> None:
        await self.issuer.close()

    async def verify(self, token: str) -> TokenPrincipal:
        digest = hashlib.sha256(token.encode("utf-8", "replace")).digest()
        seen = self._seen.get(digest)
        if seen is not None and time.monotonic() < seen[2] and (seen[1] is None or self.issuer.fresh):
            self._seen.move_to_end(digest)
            return seen[0]
        if seen is not None:
            del self._seen[digest]
        if len(token) > MAX_TOKEN:
            raise InvalidToken("the access token is over 16 KB")
        if token.count(".") == 2:
            principal, kid, until = await self._jwt(token)
        else:
            claims, until = await self.introspection.check(token)
            principal, kid = self._principal(claims), None
        self._seen[digest] = (principal, kid, until)
        if len(self._seen) > MAX_REMEMBERED:
            self._seen.popitem(last=False)
        return principal

    async def _jwt(self, token: str) -> tuple[TokenPrincipal, str, float]:
        header, claims = jws.parse(token)  # once: the signature and claims are checked by hand (jws.py)
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.config.algorithms:
            raise InvalidToken(
                f"the access token is signed with {str(alg)[:20]!r}, which ToolDock does not accept "
                f"(it takes {', '.join(self.config.algorithms)})"
            )
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the access token's key id (kid) is not a string")
        key = await self.issuer.key(kid)
        if key is None:
            raise InvalidToken(
                f"the issuer lists no key {str(kid)[:80]!r}: the token was not signed by it, or with a key it "
                "has since removed"
            )
        jws.check_signature(token, alg, key)
        jws.check_claims(claims, self.config.issuer, self.config.leeway)
        principal = self._principal(claims)
        left = float(claims["exp"]) + self.config.leeway - time.time()
        return principal, kid or "", time.monotonic() + left

    def _principal(self, claims: dict[str, Any]) -> TokenPrincipal:
        namespace = self.audience(claims.get("aud"))
        exp = claims.get("exp")
        expires = datetime.fromtimestamp(float(exp) + self.config.leeway, UTC) if isinstance(exp, int | float) else None
        resource = f"{self._ns_prefix}{namespace}/mcp" if namespace else self.resource
        return principal_for(claims, self.config.claim, self.config.grants, namespace or None, expires, resource)

    def audience(self, aud: Any) -> str:
        """The empty string when `aud` names this resource; the namespace when it names only one namespace's
        endpoint; else InvalidToken."""
        listed = aud if isinstance(aud, list) else [aud]
        auds = [a for a in listed if isinstance(a, str)]
        if self.resource in auds or self.resource.rstrip("/") + "/" in auds or set(auds) & set(self.config.audiences):
            return ""
        for value in auds:
            if self._ns_prefix is not None and value.startswith(self._ns_prefix) and value.endswith("/mcp"):
                namespace = value[len(self._ns_prefix) : -len("/mcp")]
                if namespace and "/" not in namespace:
                    return namespace
        raise InvalidToken(
            f"the access token is for another resource ({', '.join(a[:120] for a in auds) or 'no audience'}), "
            f"not {self.resource}: ask the issuer for a token with resource={self.resource}"
        )

    def _keys_changed(self, kids: set[str]) -> None:
        """Forget tokens verified with a key the issuer no longer lists."""
        for digest, (_, kid, _) in list(self._seen.items()):
            if kid is not None and kid != "" and kid not in kids:
                self._seen.pop(digest, None)
