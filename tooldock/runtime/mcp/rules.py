"""HTTP rules of seed 000 ("Streamable HTTP behavior") that the SDK answers differently, checked before a
request reaches it: a POST whose Content-Type is not application/json is 415 (the SDK says 400), and a
GET that does not accept text/event-stream is 406 (the SDK says 400). Everything else (406 for a POST's
Accept, 400 for an unsupported protocol version, 404 for an unknown session) is the SDK's own answer.

403 for a foreign Origin: with MCP_ALLOWED_ORIGINS set, `origin_refused` checks it here, for every bind.
The SDK's TransportSecuritySettings cannot do this alone: its Origin check only runs together with its Host
check (`enable_dns_rebinding_protection`), and an allowed Host must be listed exactly or as `host:*`, with
no "any host" entry, so a gateway bound to 0.0.0.0 (reached by names ToolDock does not know) could not
have an Origin allowlist without also rejecting its own Host headers. On a loopback bind the SDK's check
also runs (Host and Origin, with the same origin list), as it does without MCP_ALLOWED_ORIGINS."""

from __future__ import annotations

import json

from starlette.responses import Response
from starlette.types import Scope


def header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (the first, if repeated), or None; `name` in lower case."""
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


def _error(status: int, code: int, message: str) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    """`origin` matches an entry exactly, or an entry `scheme://host:*` with any port (as the SDK matches)."""
    origin = origin.strip().lower()
    for entry in allowed:
        if origin == entry:
            return True
        if entry.endswith(":*") and origin.startswith(entry[:-1]) and origin[len(entry) - 1 :].isdigit():
            return True
    return False


def origin_refused(scope: Scope, allowed: tuple[str, ...]) -> Response | None:
    """403 for a request whose `Origin` is not in the allowlist (MCP_ALLOWED_ORIGINS). No allowlist, or no
    Origin header (a client that is not a browser), passes."""
    return _origin_refusal(header(scope, b"origin"), allowed)


def _origin_refusal(origin: str | None, allowed: tuple[str, ...]) -> Response | None:
    if not allowed or not origin or origin_allowed(origin, allowed):
        return None
    return _error(403, -32600, f"Origin {origin!r} is not allowed (MCP_ALLOWED_ORIGINS)")


def trim_mcp_headers(scope: Scope) -> None:
    """RFC 9110 5.5: whitespace around a field value is not part of it. The HTTP parser keeps it, and the
    SDK compares `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*` with the body as sent (SEP-2243)."""
    scope["headers"] = [(k, v.strip(b" \t")) if k.startswith(b"mcp-") else (k, v) for k, v in scope["headers"]]


def precheck(scope: Scope, allowed_origins: tuple[str, ...] = ()) -> Response | None:
    """The response to send instead of passing the request to the SDK, or None. One pass over the headers
    (this runs for every MCP request)."""
    origin = content_type = accept = None  # the first of each
    untrimmed = False
    for name, value in scope["headers"]:
        if name == b"origin":
            origin = value if origin is None else origin
        elif name == b"content-type":
            content_type = value if content_type is None else content_type
        elif name == b"accept":
            accept = value if accept is None else accept
        elif name.startswith(b"mcp-") and value != value.strip(b" \t"):
            untrimmed = True
    refused = _origin_refusal(origin.decode("latin-1") if origin is not None else None, allowed_origins)
    if refused is not None:
        return refused
    method = scope["method"]
    if method == "POST":
        if untrimmed:
            trim_mcp_headers(scope)
        kind = (content_type or b"").decode("latin-1").split(";")[0].strip().lower()
        if kind != "application/json":
            return _error(415, -32600, f"Content-Type must be application/json, got {kind or 'none'!r}")
    elif method == "GET":
        wants = (accept or b"").decode("latin-1").lower()
        if "text/event-stream" not in wants and "*/*" not in wants:
            return _error(406, -32600, "GET /mcp opens an SSE stream: send 'Accept: text/event-stream'")
    return None
