"""Opaque access tokens, checked by the issuer's introspection endpoint (RFC 7662): the gateway asks as its
own client (TOOLDOCK_OAUTH_CLIENT_ID / _SECRET, HTTP Basic), and takes a token only when the answer says
`active`, names the issuer (when it names one) and this resource in `aud`, and has not expired.

An answer is remembered (by the verifier) until the token expires, and at most CACHE_FOR seconds, so a token
the issuer revokes stops working within that time.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from tooldock.errors import InvalidToken, IssuerUnavailable
from tooldock.oauth.config import OAuthConfig
from tooldock.oauth.issuer import Issuer

CACHE_FOR = 60.0  # seconds an introspection answer is used at most


class Introspection:
    def __init__(self, config: OAuthConfig, issuer: Issuer) -> None:
        self.config, self.issuer = config, issuer

    async def check(self, token: str) -> tuple[dict[str, Any], float]:
        """The token's claims and the monotonic time until which the answer may be used; InvalidToken when
        it is inactive or not for this gateway."""
        metadata = await self.issuer.metadata()
        endpoint = metadata.get("introspection_endpoint")
        if not isinstance(endpoint, str) or self.config.client_id is None or self.config.client_secret is None:
            raise InvalidToken(
                "the access token is not a JWT, and opaque tokens cannot be checked here "
                + (
                    "(the issuer has no introspection endpoint)"
                    if not isinstance(endpoint, str)
                    else "(set TOOLDOCK_OAUTH_CLIENT_ID and TOOLDOCK_OAUTH_CLIENT_SECRET to introspect them)"
                )
            )
        try:
            response = await self.issuer.http.post(
                endpoint,
                data={"token": token, "token_type_hint": "access_token"},
                auth=(self.config.client_id, self.config.client_secret),
            )
        except httpx.HTTPError as exc:
            raise IssuerUnavailable(
                f"cannot reach the introspection endpoint {endpoint}: {type(exc).__name__}"
            ) from None
        if response.status_code in (401, 403):
            raise IssuerUnavailable(
                f"the introspection endpoint refused the gateway's client ({response.status_code}): check "
                "TOOLDOCK_OAUTH_CLIENT_ID and TOOLDOCK_OAUTH_CLIENT_SECRET"
            )
        try:
            claims = response.json() if response.status_code == 200 else None
        except ValueError:
            claims = None
        if not isinstance(claims, dict):
            raise IssuerUnavailable(f"the introspection endpoint answered {response.status_code}, not a JSON object")
        if claims.get("active") is not True:
            raise InvalidToken("the issuer says the access token is not active (expired, revoked or unknown)")
        if claims.get("token_type") not in (None, "access_token", "Bearer", "bearer"):
            raise InvalidToken(f"the token is a {str(claims.get('token_type'))[:40]}, not an access token")
        if "iss" in claims and claims["iss"] != self.config.issuer:
            raise InvalidToken(f"the access token was not issued by {self.config.issuer}")
        claims.setdefault("iss", self.config.issuer)
        now = time.time()
        exp = claims.get("exp")
        if not isinstance(exp, int | float):
            raise InvalidToken("the issuer's introspection gives the access token no expiry (exp)")
        if exp + self.config.leeway <= now:
            raise InvalidToken("the access token has expired")
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and nbf - self.config.leeway > now:
            raise InvalidToken("the access token is not valid yet (nbf in the future)")
        return claims, time.monotonic() + min(CACHE_FOR, exp - now)
