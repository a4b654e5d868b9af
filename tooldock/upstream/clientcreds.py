"""An upstream MCP server's own OAuth access token (the client credentials grant, RFC 6749 section 4.4): for a
url server whose tools.toml table has `oauth = { token_url | issuer, client_id, client_secret, scope, resource }`.

    auth = client_credentials(spec, secrets)      # None without `oauth`; an httpx2.Auth otherwise
    httpx2.AsyncClient(auth=auth)                 # every request carries `Authorization: Bearer <its token>`

The client id and secret come from the namespace's secrets (`${secret:NAME}`; the secret is never written in
tools.toml). The token is fetched when first needed, kept in memory only, and fetched again before it
expires (a minute before, or at half its lifetime when that is sooner) or when the upstream answers 401. It is
made for this server alone (`resource`, RFC 8707: the server's URL unless set): a client's own token is never
sent on, and the token and the secret never appear in errors or logs (the connection's masker knows the secrets).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import anyio
import httpx2

from tooldock.namespace.toolsfile import SECRET_REF_RE, UpstreamServer, expand_secrets

TIMEOUT = 15.0
MAX_ANSWER = 64 * 1024


class ClientCredentialsError(Exception):
    """The upstream's token could not be had: what the issuer said, never a secret."""


def client_credentials(spec: UpstreamServer, secrets: Mapping[str, str]) -> ClientCredentials | None:
    if not spec.oauth:
        return None
    given = {k: expand_secrets(v, dict(secrets)) for k, v in spec.oauth}
    missing = sorted({n for v in given.values() for n in SECRET_REF_RE.findall(v)})
    if missing:
        raise ClientCredentialsError(
            f"upstream {spec.label}: oauth needs the secret(s) {', '.join(missing)}, which are not set: "
            f"set each with `tooldock secrets set NAME --namespace <namespace>`"
        )
    return ClientCredentials(
        token_url=given.get("token_url", ""),
        issuer=given.get("issuer", ""),
        client_id=given["client_id"],
        client_secret=given["client_secret"],
        scope=given.get("scope", ""),
        resource=given.get("resource") or spec.url,
    )


class ClientCredentials(httpx2.Auth):
    def __init__(
        self, token_url: str, issuer: str, client_id: str, client_secret: str, scope: str, resource: str
    ) -> None:
        self.token_url, self.issuer, self.scope, self.resource = token_url, issuer, scope, resource
        self._client = (client_id, client_secret)
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = anyio.Lock()
        self.fetched = 0  # tokens fetched so far (tests, status)

    def __repr__(self) -> str:  # never the secret nor the token
        return f"ClientCredentials(token_url={self.token_url!r}, issuer={self.issuer!r}, client={self._client[0]!r})"

    async def token(self, renew: bool = False) -> str:
        async with self._lock:
            if renew or self._token is None or time.monotonic() >= self._renew_at:
                self._token, lifetime = await self._fetch()
                self._renew_at = time.monotonic() + lifetime - min(60.0, lifetime / 2)
                self.fetched += 1
            return self._token

    async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        request.headers["Authorization"] = f"Bearer {await self.token()}"
        response = yield request
        if response.status_code == 401:  # revoked, or the upstream's clock differs: one more try, a new token
            request.headers["Authorization"] = f"Bearer {await self.token(renew=True)}"
            yield request

    async def _endpoint(self, http: httpx2.AsyncClient) -> str:
        if self.token_url:
            return self.token_url
        base = self.issuer.rstrip("/")
        for url in (f"{base}/.well-known/openid-configuration", f"{base}/.well-known/oauth-authorization-server"):
            try:
                answer = await http.get(url)
                found = answer.json().get("token_endpoint") if answer.status_code == 200 else None
            except (httpx2.HTTPError, ValueError, AttributeError):
                found = None
            if isinstance(found, str) and found.startswith(("https://", "http://")):
                self.token_url = found
                return found
        raise ClientCredentialsError(f"the issuer {self.issuer} names no token endpoint in its discovery document")

    async def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials", "resource": self.resource}
        if self.scope:
            form["scope"] = self.scope
        try:
            async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
                url = await self._endpoint(http)
                answer = await http.post(url, data=form, auth=httpx2.BasicAuth(*self._client))
        except httpx2.HTTPError as exc:
            raise ClientCredentialsError(f"the token endpoint cannot be reached: {type(exc).__name__}") from None
        try:
            body = answer.json() if len(answer.content) <= MAX_ANSWER else {}
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        token = body.get("access_token")
        if answer.status_code != 200 or not isinstance(token, str) or not token:
            why = body.get("error_description") or body.get("error") or f"HTTP {answer.status_code}"
            raise ClientCredentialsError(
                f"{url} gave no token for client {self._client[0]!r}: {str(why)[:200]} (check the client id, "
                "its secret and the scope in the server's oauth table)"
            )
        lifetime = body.get("expires_in")
        if isinstance(lifetime, (int, float)) and not isinstance(lifetime, bool) and lifetime > 0:
            return token, float(lifetime)
        return token, 300.0
