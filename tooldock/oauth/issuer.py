"""The authorization server as the gateway knows it: its metadata (found through its discovery document,
OpenID Connect's `/.well-known/openid-configuration` or RFC 8414's `/.well-known/oauth-authorization-server`)
and its signing keys (the `jwks_uri` set), cached.

The keys are fetched again when a token names a key id the cache does not hold (a rotation: the new key is
used at once, without a restart), at most once per REFRESH_EVERY seconds however many such tokens come, and
when they are older than `keys_max_age` (so a key the issuer removed stops verifying). Tokens verified with a
key that a later fetch no longer lists are forgotten by the verifier (`on_keys`).

An issuer that cannot be reached, or answers what is not its metadata, is `IssuerUnavailable` (503): the
request can be retried; the token is not blamed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import jwt

from tooldock.errors import IssuerUnavailable
from tooldock.oauth.config import OAuthConfig

REFRESH_EVERY = 5.0  # seconds between fetches of the keys that unknown key ids may cause
TIMEOUT = 10.0
MAX_DOCUMENT = 1024 * 1024
log = logging.getLogger("tooldock.oauth")


class Issuer:
    def __init__(self, config: OAuthConfig, http: httpx.AsyncClient | None = None) -> None:
        self.config = config
        self._http = http
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched = -REFRESH_EVERY * 2  # monotonic time of the last fetch of the keys (success or not)
        self._fresh_until = 0.0
        self._lock = asyncio.Lock()
        self.on_keys: list[Callable[[set[str]], None]] = []  # told the key ids of every new set

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:  # no redirects: a document must be served where its issuer says
            self._http = httpx.AsyncClient(
                timeout=TIMEOUT, follow_redirects=False, headers={"Accept": "application/json"}
            )
        return self._http

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def metadata(self) -> dict[str, Any]:
        """The issuer's metadata (fetched once, then kept; a failed fetch is tried again by the next request)."""
        if self._metadata is None:
            async with self._lock:
                if self._metadata is None:
                    self._metadata = await self._discover()
        return self._metadata

    @property
    def fresh(self) -> bool:
        """Whether the keys were fetched less than `keys_max_age` ago."""
        return time.monotonic() < self._fresh_until

    def cached_key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key for `kid` while the cache is fresh (no I/O): the fast path of every token check."""
        return self._pick(kid) if time.monotonic() < self._fresh_until else None

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key for `kid` (a token without one: the set's only key), fetching the keys first when they are
        stale or `kid` is new to them, at most once per REFRESH_EVERY seconds; None when the issuer has no such
        key. An issuer that cannot be reached leaves the keys it listed last in use."""
        found = self.cached_key(kid)
        if found is not None:
            return found
        if time.monotonic() - self._fetched >= REFRESH_EVERY:
            async with self._lock:
                if time.monotonic() - self._fetched >= REFRESH_EVERY:
                    try:
                        await self._refresh()
                    except IssuerUnavailable as exc:
                        if not self._keys:
                            raise
                        log.warning("oauth: keeping the issuer's last keys: %s", exc.message)
        elif not self._keys:
            raise IssuerUnavailable(f"the issuer {self.config.issuer}'s keys could not be fetched; retry shortly")
        return self._pick(kid)

    def _pick(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _refresh(self) -> None:
        self._fetched = time.monotonic()
        metadata = self._metadata or await self._discover()
        self._metadata = metadata
        uri = metadata.get("jwks_uri")
        if not isinstance(uri, str):
            raise IssuerUnavailable(f"the issuer {self.config.issuer} lists no jwks_uri: it cannot sign JWT tokens")
        document = await self._get(uri)
        keys: dict[str, jwt.PyJWK] = {}
        for n, jwk in enumerate(document.get("keys") or ()):
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig" or jwk.get("kty") == "oct":
                continue
            try:
                keys[str(jwk.get("kid") or f"#{n}")] = jwt.PyJWK(jwk)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError) as exc:
                log.warning("the issuer's key %s cannot be used: %s", str(jwk.get("kid"))[:80], exc)
        if not keys:
            raise IssuerUnavailable(f"the issuer's key set at {uri} holds no signing key ToolDock can use")
        gone = set(self._keys) - set(keys)
        if gone:
            log.info(
                "oauth: the issuer no longer lists key(s) %s: tokens they signed are refused", ", ".join(sorted(gone))
            )
        self._keys = keys
        self._fresh_until = time.monotonic() + self.config.keys_max_age
        for listener in self.on_keys:
            listener(set(keys))

    async def _discover(self) -> dict[str, Any]:
        issuer = self.config.issuer
        base = issuer.rstrip("/")
        scheme, _, rest = base.partition("://")
        host, _, path = rest.partition("/")
        tried = [
            f"{base}/.well-known/openid-configuration",
            f"{scheme}://{host}/.well-known/oauth-authorization-server" + (f"/{path}" if path else ""),
        ]
        failures = []
        for url in tried:
            try:
                document = await self._get(url)
            except IssuerUnavailable as exc:
                failures.append(exc.message)
                continue
            if document.get("issuer") != issuer:
                raise IssuerUnavailable(
                    f"the discovery document at {url} names issuer {str(document.get('issuer'))[:200]!r}, not "
                    f"TOOLDOCK_OAUTH_ISSUER {issuer!r}: set the issuer exactly as the provider writes it "
                    "(a trailing slash counts)"
                )
            return document
        raise IssuerUnavailable(f"no discovery document for the issuer {issuer}: {'; '.join(failures)[:600]}")

    async def _get(self, url: str) -> dict[str, Any]:
        try:
            response = await self.http.get(url)
        except httpx.HTTPError as exc:
            raise IssuerUnavailable(f"cannot reach {url}: {type(exc).__name__}: {str(exc)[:200]}") from None
        if response.status_code != 200 or len(response.content) > MAX_DOCUMENT:
            raise IssuerUnavailable(f"{url} answered {response.status_code}")
        try:
            document = response.json()
        except ValueError:
            document = None
        if not isinstance(document, dict):
            raise IssuerUnavailable(f"{url} did not answer a JSON object")
        return document
