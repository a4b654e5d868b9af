"""Whose state a Context tool's `ctx.set_state()` / `ctx.get_state()` belong to: the MCP session that called it.

FastMCP keys a session's state (and `ctx.session_id`) by the session's `Mcp-Session-Id`, so what a tool sets
in one call is there in the session's next. The worker runs each call on a connection of its own
(worker/direct.py), which has no such id: every call got a new one, and state set in one call was gone in
the next. The gateway now sends the worker an opaque scope per MCP session (the worker protocol's `scope`),
an HMAC of the session id under a key made when the gateway starts: stable for the session, the same on the
SDK's path and the lean path, and never the session id itself, which with the caller's credentials is enough
to speak on the session and is not the tool author's to see.

Only handshake-era sessions (up to 2025-11-25, streamable HTTP or legacy SSE) have one. A 2026-07-28 request
has no session, so its calls have no scope and each call's state is its own, as FastMCP keeps it for an
unauthenticated 2026-07-28 client; so do REST and relay-socket calls.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

_KEY = secrets.token_bytes(32)  # per gateway process: a restart starts every session's state afresh, as FastMCP's


def scope_of(session_id: str | None) -> str | None:
    """The worker's scope for an MCP session id (None: no session)."""
    if not session_id:
        return None
    return hmac.new(_KEY, session_id.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:32]


def scope_of_request(ctx: Any) -> str | None:
    """The scope of the session an SDK-served request belongs to: its `Mcp-Session-Id` (streamable HTTP) or
    the `session_id` of its `POST /messages` (legacy SSE), which the SDK checked before serving it; None for
    a 2026-07-28 request, whatever headers it carries."""
    if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return None
    request = getattr(ctx, "request", None)
    if request is None:
        return None
    return scope_of(request.headers.get("mcp-session-id") or request.query_params.get("session_id"))
