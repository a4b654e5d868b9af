"""`requestState` sealed by the gateway (MCP 2026-07-28, SEP-2322), with the SDK's own boundary.

Every `input_required` result a namespace returns carries a `requestState` that the client echoes on its
retry. The SDK's `RequestStateBoundary` seals it (AES-256-GCM under a key derived with HKDF; an expiry;
bound to the method, the tool, prompt or URI, a digest of the arguments, the namespace as audience and
the caller's API key) and opens the echo before any handler runs. A token that was altered, has
expired, was minted for another call or namespace, or under a key this gateway does not hold is refused
with -32602 "Invalid or expired requestState" (the reason goes to the log only).

The keys come from TOOLDOCK_STATE_KEY (comma-separated: the first seals, every one opens, for rotation),
so any replica holding the same key can take a retry; unset, a key is generated for this run.
"""

from __future__ import annotations

from typing import Any

from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

from tooldock.runtime.access import key_of_request
from tooldock.runtime.settings import Settings


def principal(ctx: Any) -> str | None:
    """Whose state it is: the API key that made the request (bearer-token callers are one principal)."""
    key = key_of_request(getattr(ctx, "request", None))
    return f"key:{key.id}" if key is not None else None


def boundary(settings: Settings, namespace: str) -> RequestStateBoundary:
    security = RequestStateSecurity(keys=list(settings.state_keys), ttl=settings.state_ttl, bind_principal=principal)
    return RequestStateBoundary(security, default_audience=f"tooldock/{namespace}")
