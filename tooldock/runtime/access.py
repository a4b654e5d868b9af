"""Who a request is, as far as API keys go: the key the HTTP edge (or the relay socket) checked, carried in
the ASGI scope to every front end, and the log line every keyed call leaves (the key's id, never the key).

`None` is the bearer token (TOOLDOCK_BEARER_TOKEN): unrestricted, and not logged here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tooldock.keys import ApiKey

ASGI_KEY = "tooldock.api_key"  # the ASGI scope entry BearerAuth fills with the checked ApiKey
log = logging.getLogger("tooldock.access")


def key_of(scope: Mapping[str, Any] | None) -> ApiKey | None:
    """The API key a request was admitted with (None: the bearer token, or no HTTP request at all)."""
    found = scope.get(ASGI_KEY) if scope is not None else None
    return found if isinstance(found, ApiKey) else None


def key_of_request(request: Any) -> ApiKey | None:
    """The same, from a Starlette request (or None), as the MCP SDK hands it to a handler (`ctx.request`)."""
    return key_of(getattr(request, "scope", None))


def restricted(key: ApiKey | None) -> ApiKey | None:
    """The key when its scope narrows anything; None when it may do what the bearer token may."""
    return key if key is not None and not key.unrestricted else None


def audit(key: ApiKey | None, via: str, what: str, outcome: str) -> None:
    """One line per call made with an API key: which key (id and name), through what, and how it ended."""
    if key is not None:
        log.info("key %s (%s, %s) %s %s: %s", key.id, key.name, key.scope, via, what, outcome)


def audit_refused(key_id: str | None, via: str, reason: str) -> None:
    log.warning("key %s refused on %s: %s", key_id or "(not a key)", via, reason)
