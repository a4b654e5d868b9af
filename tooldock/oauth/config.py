"""The OAuth resource server's settings (TOOLDOCK_OAUTH_*), read and checked at start-up: every refusal is an
`OAuthConfigError` naming the variable and saying what to write instead (never a secret's value)."""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from tooldock.errors import OAuthConfigError
from tooldock.oauth.grants import Grant, default_grants, load_grants_file, parse_scope_names

# Asymmetric algorithms only: `none` is never accepted, nor HMAC (HS*), whose key would be the issuer's
# public key, which anyone can read.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
REFUSED_ALGORITHMS = ("none", "HS256", "HS384", "HS512")
MAX_SECRET = 4096


@dataclass(frozen=True)
class OAuthConfig:
    issuer: str
    resource: str | None = None  # None: the gateway's URL + /mcp, filled in by `for_gateway`
    audiences: tuple[str, ...] = ()  # other `aud` values that name this gateway (Entra ID's api://<app id>, ...)
    claim: str = "scope"  # the claim whose values the grants name
    grants: tuple[Grant, ...] = default_grants()
    algorithms: tuple[str, ...] = ALGORITHMS
    leeway: float = 30.0  # seconds of clock skew allowed on exp / nbf / iat
    keys_max_age: float = 300.0  # seconds the issuer's keys are used before they are fetched again
    client_id: str | None = None  # the gateway's own client, for token introspection (RFC 7662)
    client_secret: str | None = None
    dashboard_client_id: str | None = None  # the dashboard's public client (sign-in with PKCE in the browser)
    manager_resource: str | None = None  # the manager's own resource (None: its URL + /mcp)

    @classmethod
    def from_env(cls, env: dict[str, str]) -> OAuthConfig | None:
        """The settings, or None when TOOLDOCK_OAUTH_ISSUER is unset (then only the bearer token and API keys)."""
        issuer = env.get("TOOLDOCK_OAUTH_ISSUER", "").strip()
        if not issuer:
            return None
        check_url("TOOLDOCK_OAUTH_ISSUER", issuer, "https://login.example.com/realms/main")
        resource = env.get("TOOLDOCK_OAUTH_RESOURCE", "").strip() or None
        if resource is not None:
            check_url("TOOLDOCK_OAUTH_RESOURCE", resource, "https://tools.example.com/mcp")
        audiences = tuple(a.strip() for a in env.get("TOOLDOCK_OAUTH_AUDIENCES", "").split(",") if a.strip())
        if any(len(a) > 500 or " " in a for a in audiences):
            raise OAuthConfigError("TOOLDOCK_OAUTH_AUDIENCES: audiences are comma-separated, without spaces")
        claim, grants = "scope", default_grants(parse_scope_names(env.get("TOOLDOCK_OAUTH_SCOPES", "")))
        grants_file = env.get("TOOLDOCK_OAUTH_GRANTS_FILE", "").strip()
        if grants_file:
            if env.get("TOOLDOCK_OAUTH_SCOPES", "").strip():
                raise OAuthConfigError(
                    "TOOLDOCK_OAUTH_SCOPES and TOOLDOCK_OAUTH_GRANTS_FILE are both set: "
                    "the grants file names the scopes itself; keep one"
                )
            claim, grants = load_grants_file(Path(grants_file).expanduser())
        manager_resource = env.get("TOOLDOCK_MANAGER_OAUTH_RESOURCE", "").strip() or None
        if manager_resource is not None:
            check_url("TOOLDOCK_MANAGER_OAUTH_RESOURCE", manager_resource, "https://manager.example.com/mcp")
        client_id = env.get("TOOLDOCK_OAUTH_CLIENT_ID", "").strip() or None
        secret = _secret(env)
        if (client_id is None) != (secret is None):
            raise OAuthConfigError(
                "TOOLDOCK_OAUTH_CLIENT_ID and TOOLDOCK_OAUTH_CLIENT_SECRET go together (the gateway's own client, "
                "for introspecting opaque tokens): set both, or neither"
            )
        return cls(
            issuer=issuer,
            resource=resource,
            audiences=audiences,
            claim=claim,
            grants=grants,
            algorithms=_algorithms(env.get("TOOLDOCK_OAUTH_ALGORITHMS", "")),
            leeway=_seconds(env, "TOOLDOCK_OAUTH_LEEWAY", 30.0, 300.0),
            keys_max_age=_seconds(env, "TOOLDOCK_OAUTH_KEYS_MAX_AGE", 300.0, 86400.0),
            client_id=client_id,
            client_secret=secret,
            dashboard_client_id=_client_id(env, "TOOLDOCK_OAUTH_DASHBOARD_CLIENT_ID"),
            manager_resource=manager_resource,
        )

    def for_gateway(self, url: str) -> OAuthConfig:
        """With the resource filled in from the gateway's URL (`url` + /mcp) when it was not set."""
        if self.resource is not None:
            return self
        host = urlsplit(url).hostname or ""
        try:
            unspecified = ipaddress.ip_address(host).is_unspecified
        except ValueError:
            unspecified = False
        if not url or unspecified:
            raise OAuthConfigError(
                f"TOOLDOCK_OAUTH_RESOURCE is needed: the gateway listens on {url or 'no URL'}, which no client "
                "reaches it by; set it to the URL clients use for MCP, e.g. https://tools.example.com/mcp"
            )
        return replace(self, resource=url.rstrip("/") + "/mcp")

    def for_manager(self, url: str) -> OAuthConfig:
        """The manager's settings: its own resource (TOOLDOCK_MANAGER_OAUTH_RESOURCE, or `url` + /mcp), none of
        the gateway's other audiences: a token for the gateway is not one for the manager."""
        if self.manager_resource is not None:
            return replace(self, resource=self.manager_resource, audiences=())
        try:
            return replace(self, resource=None, audiences=()).for_gateway(url)
        except OAuthConfigError:
            raise OAuthConfigError(
                f"TOOLDOCK_MANAGER_OAUTH_RESOURCE is needed: the manager listens on {url or 'no URL'}, which no "
                "client reaches it by; set it to the URL clients use for the manager's MCP endpoint, e.g. "
                "https://manager.example.com/mcp"
            ) from None

    def __repr__(self) -> str:  # never the client secret
        return f"OAuthConfig(issuer={self.issuer!r}, resource={self.resource!r}, claim={self.claim!r})"


def _client_id(env: dict[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    if len(value) > 200 or any(not 0x21 <= ord(c) < 0x7F for c in value):
        raise OAuthConfigError(f"{name}: a client id is up to 200 printable ASCII characters without spaces")
    return value or None


def check_url(name: str, value: str, example: str) -> str:
    parts = urlsplit(value)
    loopback = parts.hostname in ("localhost", "127.0.0.1", "::1")
    if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment:
        raise OAuthConfigError(
            f"{name}: {value[:200]!r} is not an absolute URL without query or fragment; e.g. {example}"
        )
    if parts.scheme == "http" and not loopback:
        raise OAuthConfigError(f"{name}: {value[:200]!r} must use https (plain http only on localhost); e.g. {example}")
    return value


def _algorithms(raw: str) -> tuple[str, ...]:
    if not raw.strip():
        return ALGORITHMS
    chosen = tuple(a.strip() for a in raw.split(",") if a.strip())
    for alg in chosen:
        if alg.lower() in ("none", "hs256", "hs384", "hs512") or alg not in ALGORITHMS:
            raise OAuthConfigError(
                f"TOOLDOCK_OAUTH_ALGORITHMS: {alg[:20]!r} is not accepted; choose among {', '.join(ALGORITHMS)} "
                "(never none, nor HMAC)"
            )
    return chosen


def _seconds(env: dict[str, str], name: str, default: float, most: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= most:
        raise OAuthConfigError(f"{name}={raw[:40]!r}: give a number of seconds from 0 to {most:g}, e.g. {default:g}")
    return value


def _secret(env: dict[str, str]) -> str | None:
    """TOOLDOCK_OAUTH_CLIENT_SECRET, or the file TOOLDOCK_OAUTH_CLIENT_SECRET_FILE names (a mounted secret)."""
    value = env.get("TOOLDOCK_OAUTH_CLIENT_SECRET", "").strip()
    path = env.get("TOOLDOCK_OAUTH_CLIENT_SECRET_FILE", "").strip()
    if value and path:
        raise OAuthConfigError(
            "TOOLDOCK_OAUTH_CLIENT_SECRET and TOOLDOCK_OAUTH_CLIENT_SECRET_FILE are both set: keep one"
        )
    if path:
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_SECRET + 1)
            value = data.decode("utf-8").strip() if len(data) <= MAX_SECRET else ""
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise OAuthConfigError(f"TOOLDOCK_OAUTH_CLIENT_SECRET_FILE: cannot read {path}: {reason}") from None
        if not value:
            raise OAuthConfigError(
                f"TOOLDOCK_OAUTH_CLIENT_SECRET_FILE: {path} is empty or over 4 KB; it must hold only the secret"
            )
    return value or None
