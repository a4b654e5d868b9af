"""Who a request is, as far as API keys go: the key the HTTP edge (or the relay socket) checked, carried in
the ASGI scope to every front end, and the log line every keyed call leaves (the key's id, never the key).

`None` is the bearer token (TOOLDOCK_BEARER_TOKEN): unrestricted, and not logged here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from tooldock.keys import ApiKey, KeyStore

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
    """One line per call made with an API key (which key: id and name) or an OAuth token (its principal's id,
    subject and client id; never the token), through what, and how it ended."""
    if key is not None:
        log.info("key %s (%s, %s) %s %s: %s", key.id, key.name, key.scope, via, what, outcome)


def audit_refused(key_id: str | None, via: str, reason: str) -> None:
    log.warning("key %s refused on %s: %s", key_id or "(not a key)", via, reason)


async def check_key(keys: KeyStore, presented: str) -> ApiKey:
    """The presented API key, checked (InvalidApiKey when refused): on the event loop when the keys file has
    not changed since it was last read (one `stat` of a local file), else in a thread, which reads it."""
    key = keys.check_fresh(presented)
    return key if key is not None else await asyncio.to_thread(keys.check, presented)


def touch_later(keys: KeyStore, key: ApiKey, tasks: set[asyncio.Task[Any]]) -> None:
    """Record in a thread that `key` was used, when that is due (`last_used` is kept to the minute); the
    task is held in `tasks` until done."""
    if keys.touch_due(key):
        task = asyncio.ensure_future(asyncio.to_thread(keys.touch, key))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
