"""What the gateway tells OAuth clients about itself (MCP authorization, RFC 9728 and RFC 6750):

    GET /.well-known/oauth-protected-resource[/<path of the MCP endpoint>]   -> `resource_metadata(...)`
    401  WWW-Authenticate: Bearer resource_metadata="<that URL>"[, error="invalid_token", ...]
    403  WWW-Authenticate: Bearer error="insufficient_scope", scope="<the scope the call needs>", ...

A request to one namespace's endpoint (`/ns/<namespace>/...`) is pointed at that endpoint's metadata, whose
resource is `<base>/ns/<namespace>/mcp` (a token for it is narrowed to that namespace).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # config imports grants, which imports this module
    from tooldock.oauth.config import OAuthConfig

WELL_KNOWN = "/.well-known/oauth-protected-resource"
_NS_PATH = re.compile(r"^/ns/([a-z0-9][a-z0-9-]{0,62})(?:/|$)")


def resource_for(config: OAuthConfig, path: str) -> str:
    """The resource a request to `path` (the gateway's own path, or the well-known suffix) is served as."""
    assert config.resource is not None
    found = _NS_PATH.match(path)
    if found is not None and config.resource.endswith("/mcp"):
        return f"{config.resource.removesuffix('/mcp')}/ns/{found.group(1)}/mcp"
    return config.resource


def metadata_url(resource: str) -> str:
    """Where a resource's metadata is (RFC 9728 section 3.1: the well-known path, then the resource's path)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"


def resource_metadata(config: OAuthConfig, resource: str) -> dict[str, Any]:
    document: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": [config.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "ToolDock",
    }
    if config.claim == "scope":
        document["scopes_supported"] = list(dict.fromkeys(g.value for g in config.grants))
    return document


def challenge(resource: str, error: str | None = None, description: str | None = None, scope: str | None = None) -> str:
    """A `WWW-Authenticate: Bearer ...` value (quotes and backslashes taken out of the free text)."""
    params = [f'resource_metadata="{metadata_url(resource)}"']
    if error is not None:
        params.append(f'error="{error}"')
    if description is not None:
        params.append(f'error_description="{_quotable(description)[:300]}"')
    if scope is not None:
        params.append(f'scope="{_quotable(scope)}"')
    return "Bearer " + ", ".join(params)


def _quotable(text: str) -> str:
    return "".join(c for c in text if c not in '"\\' and 0x20 <= ord(c) < 0x7F)
