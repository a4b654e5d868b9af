"""ToolDock as an OAuth 2.1 resource server (MCP authorization): access tokens from one OpenID / OAuth issuer
accepted beside the bearer token and API keys.

    config = OAuthConfig.from_env(env)                # None unless TOOLDOCK_OAUTH_ISSUER is set
    verifier = TokenVerifier(config.for_gateway(url)) # the resource: TOOLDOCK_OAUTH_RESOURCE, or url + /mcp
    principal = await verifier.verify(token)          # -> TokenPrincipal (an ApiKey), InvalidToken, ...

Modules, one job each: `config` (the settings), `issuer` (discovery and the issuer's keys, cached),
`verify` (JWT access tokens, RFC 9068), `introspect` (opaque ones, RFC 7662), `grants` (token scopes or
claims onto ToolDock's scopes and globs), `metadata` (RFC 9728's document and the WWW-Authenticate
challenges). Imports `tooldock.keys`, `tooldock.errors` and `tooldock.envvars`; no web framework (the HTTP
edge, runtime.http.auth, uses it).
"""

from tooldock.envvars import EnvVar, names
from tooldock.oauth.config import ALGORITHMS, OAuthConfig
from tooldock.oauth.grants import TokenPrincipal
from tooldock.oauth.metadata import WELL_KNOWN, challenge, metadata_url, resource_for, resource_metadata
from tooldock.oauth.verify import TokenVerifier

SETTINGS_TITLE = "OAuth (access tokens from an OpenID provider)"
SETTINGS_INTRO = (
    "With `TOOLDOCK_OAUTH_ISSUER` set, the gateway also accepts access tokens that issuer made for it, as the "
    "MCP authorization specification says (see [Sign in with an OpenID provider](../howto/oauth.md)). "
    "The bearer token and API keys keep working beside them."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_OAUTH_ISSUER",
        "unset (no OAuth)",
        "the authorization server's issuer URL, exactly as its discovery document and tokens write it (a "
        "trailing slash counts); its metadata is found at `/.well-known/openid-configuration` or "
        "`/.well-known/oauth-authorization-server`; https, or http on localhost",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_RESOURCE",
        "the gateway's URL + `/mcp`",
        "this gateway's resource identifier (RFC 8707): the URL clients use for its MCP endpoint, e.g. "
        "`https://tools.example.com/mcp`; a token's `aud` must name it (or `<base>/ns/<namespace>/mcp`, which "
        "narrows the token to that namespace); needed when the gateway listens on 0.0.0.0 or sits behind a proxy",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_AUDIENCES",
        "unset",
        "other `aud` values, comma-separated, that also name this gateway: for a provider that writes its own "
        "identifier for the API instead of the resource URL (Entra ID's application ID URI or client id)",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_SCOPES",
        "`read=tooldock:read,write=tooldock:write,admin=tooldock:admin`",
        "the token scopes that grant ToolDock's read, write and admin (the first a token holds, from admin "
        "down, wins); give only those to rename, e.g. `read=api://tooldock/tools.read`",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_GRANTS_FILE",
        "unset",
        "a YAML file mapping a claim's values (scopes, or `groups`, `roles`, ...) onto a scope with namespace "
        "and tool globs, instead of `TOOLDOCK_OAUTH_SCOPES` (see the how-to)",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_ALGORITHMS",
        "`" + ",".join(ALGORITHMS) + "`",
        "the signature algorithms accepted on JWT access tokens; never `none` nor HMAC",
    ),
    EnvVar("TOOLDOCK_OAUTH_LEEWAY", "`30`", "seconds of clock difference allowed on a token's `exp`, `nbf` and `iat`"),
    EnvVar(
        "TOOLDOCK_OAUTH_KEYS_MAX_AGE",
        "`300`",
        "seconds the issuer's signing keys are used before they are fetched again (they are fetched at once, "
        "at most every 5 s, when a token names a key id they do not hold)",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_CLIENT_ID",
        "unset",
        "the gateway's own client at the issuer, used only to introspect opaque access tokens (RFC 7662); "
        "without it only JWT access tokens are accepted",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_CLIENT_SECRET",
        "unset",
        "that client's secret (or `TOOLDOCK_OAUTH_CLIENT_SECRET_FILE`: a file holding it)",
    ),
    EnvVar(
        "TOOLDOCK_OAUTH_DASHBOARD_CLIENT_ID",
        "unset (no single sign-on on the dashboard)",
        "a public client (no secret) registered at the issuer for the web dashboard, with the redirect URI "
        "`<gateway URL>/ui/callback` and the token endpoint open to the gateway's origin (CORS): the sign-in "
        'page then offers "Sign in with" the issuer (authorization code with PKCE, in the browser)',
    ),
    EnvVar(
        "TOOLDOCK_MANAGER_OAUTH_RESOURCE",
        "the manager's URL + `/mcp`",
        "the manager's own resource identifier, when it accepts the issuer's tokens (scope `tooldock:admin`): "
        "the URL MCP clients use for the manager, e.g. `https://manager.example.com/mcp`",
    ),
)
ENV_VARS = names(SETTINGS)

__all__ = [
    "ENV_VARS",
    "SETTINGS",
    "SETTINGS_INTRO",
    "SETTINGS_TITLE",
    "WELL_KNOWN",
    "OAuthConfig",
    "TokenPrincipal",
    "TokenVerifier",
    "challenge",
    "metadata_url",
    "resource_for",
    "resource_metadata",
]
