"""Request ids: the `X-Request-Id` a client sent (when it is safe to echo and log) or a new one.

The HTTP edge (`runtime.http.edge`) picks the id for every request, puts it in the ASGI scope and in
`current` (a context variable, so the call path below it needs no extra parameter), and echoes it in the
response. MCP handlers run in the SDK's own tasks, where the variable is not inherited: they take the id
from the request the SDK hands them (`of_scope`) and set `current` themselves. The worker client sends
`current` along with each request, so a worker's log line about a call names the same id.
"""

from __future__ import annotations

import random
import re
from contextvars import ContextVar
from typing import Any

HEADER = "x-request-id"
SCOPE_KEY = "tooldock.request_id"
MAX_LENGTH = 128
# Safe to echo in a header and to write in a log line: no spaces, quotes, control characters or newlines.
_SAFE = re.compile(rf"^[A-Za-z0-9._:@/+=-]{{1,{MAX_LENGTH}}}$")

current: ContextVar[str | None] = ContextVar("tooldock_request_id", default=None)
# The W3C `traceparent` of the gateway's span for the hop to a worker (set while tracing is on), sent with it.
traceparent: ContextVar[str | None] = ContextVar("tooldock_traceparent", default=None)


def new() -> str:
    """24 random hex digits: unique, not secret (a client may choose its own), so no system call for them."""
    return f"{random.getrandbits(96):024x}"


def accept(presented: str | None) -> str:
    """The client's id when it is 1-128 characters of letters, digits and `._:@/+=-`; else a new one."""
    if presented is not None and _SAFE.match(presented):
        return presented
    return new()


def of_scope(scope: Any) -> str | None:
    """The id the edge gave this request (`scope` may be an ASGI scope or a Starlette request)."""
    found = getattr(scope, "scope", scope)
    return found.get(SCOPE_KEY) if isinstance(found, dict) else None
