"""Session state (`ctx.set_state()` / `ctx.get_state()` / `ctx.delete_state()`) behind the gateway: the
values are the MCP session's, kept by the gateway, so they outlive the worker that set them.

FastMCP keeps a session's state in its server's state store, under `<session id>:<key>`. Behind ToolDock a
worker comes and goes while the session goes on: a reload swaps in a new worker, a crashed one is
restarted, an idle one sleeps. So the gateway keeps each session's values (runtime/mcp/session.py) and
hands them to the worker with every call it makes for that session (the worker protocol's `state`); here
the server's state store answers fastmcp's reads of the calling session's keys from them, and turns its
writes into `state` events, which the gateway applies to the session's values. A call sees the values as
they were when it started, with its own writes.

Only the calling session's own keys are the gateway's: a call with no session (2026-07-28, REST, the
relay socket) and any other key (fastmcp's stateless sessions, `get_session()`) keep using the worker's
store, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, SupportsFloat

from key_value.aio.protocols.key_value import AsyncKeyValue

from tooldock.worker.callstore import CALL, PerKey
from tooldock.worker.protocol import state_refusal

STATE_COLLECTION = "fastmcp_state"  # the collection fastmcp's state adapter uses (FastMCP._state_store)


class SessionValues(PerKey):
    """The worker server's state store: `store`, but the calling session's own keys are the gateway's."""

    def __init__(self, store: AsyncKeyValue) -> None:
        self.key_value = store
        super().__init__()

    async def get(self, key: str, *, collection: str | None = None) -> dict[str, Any] | None:
        values, name = _session_key(key, collection)
        if values is None:
            return await self.key_value.get(key=key, collection=collection)
        found = values.get(name)
        return dict(found) if isinstance(found, dict) else None

    async def ttl(self, key: str, *, collection: str | None = None) -> tuple[dict[str, Any] | None, float | None]:
        if _session_key(key, collection)[0] is None:
            return await self.key_value.ttl(key=key, collection=collection)
        return await self.get(key, collection=collection), None  # a session's values last as long as it does

    async def put(
        self, key: str, value: Mapping[str, Any], *, collection: str | None = None, ttl: SupportsFloat | None = None
    ) -> None:
        values, name = _session_key(key, collection)
        if values is None:
            await self.key_value.put(key=key, value=value, collection=collection, ttl=ttl)
            return
        kept = dict(value)
        if (refusal := state_refusal(values, name, kept)) is not None:
            raise RuntimeError(refusal)
        values[name] = kept
        await CALL.get().event("state", {"key": name, "value": kept})

    async def delete(self, key: str, *, collection: str | None = None) -> bool:
        values, name = _session_key(key, collection)
        if values is None:
            return await self.key_value.delete(key=key, collection=collection)
        existed = values.pop(name, None) is not None
        await CALL.get().event("state", {"key": name, "value": None})
        return existed


def _session_key(key: str, collection: str | None) -> tuple[dict[str, Any] | None, str]:
    """The calling session's values and the key's name in them, when the key is one of that session's
    (`<scope>:<name>` in fastmcp's state collection); else None: the worker's store keeps it."""
    call = CALL.get()
    scope = call.scope if call is not None else None
    if scope is None or collection not in (None, STATE_COLLECTION) or not key.startswith(f"{scope}:"):
        return None, key
    return call.state, key[len(scope) + 1 :]
