"""Session visibility (`ctx.enable_components()`, `ctx.disable_components()`, `ctx.reset_visibility()`),
refused with an error that says so, where it did nothing.

FastMCP keeps a session's visibility rules in its state store and filters that session's lists and calls
by them. Behind the gateway the lists are the gateway's, the same for every session, and plain tools never
reach the worker's FastMCP server: a tool that hid or showed components succeeded and changed nothing
(the hidden tool was still listed and still ran). Until the gateway applies such rules itself, storing
them fails instead, before fastmcp sends its list-changed notifications, so the tool's author finds out at
the first call (`tooldock check` warns of the calls too). Everything else in the state store, the session
state a tool keeps with `ctx.set_state()`, passes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

from key_value.aio.protocols.key_value import AsyncKeyValue
from key_value.aio.wrappers.base import BaseWrapper

RULES_SUFFIX = ":_visibility_rules"  # fastmcp's key for a session's rules (transforms/visibility.py)
REFUSAL = (
    "session visibility (ctx.enable_components, ctx.disable_components, ctx.reset_visibility) is not "
    "supported behind ToolDock: the gateway lists a namespace's tools, resources and prompts the same for "
    "every session. Leave the call out; to show different tools to different callers, put them in separate "
    "namespaces or limit an API key's scope to some tools"
)


class SessionVisibilityUnsupported(RuntimeError):
    """A tool tried to change its session's visibility rules."""


def _refuse(key: str) -> None:
    if key.endswith(RULES_SUFFIX):
        raise SessionVisibilityUnsupported(REFUSAL)


class NoSessionVisibility(BaseWrapper):
    """The worker server's state store: `store`, but for session visibility rules, which it refuses."""

    def __init__(self, store: AsyncKeyValue) -> None:
        self.key_value = store
        super().__init__()

    async def put(
        self, key: str, value: Mapping[str, Any], *, collection: str | None = None, ttl: SupportsFloat | None = None
    ) -> None:
        _refuse(key)
        await self.key_value.put(key=key, value=value, collection=collection, ttl=ttl)

    async def put_many(
        self,
        keys: Sequence[str],
        values: Sequence[Mapping[str, Any]],
        *,
        collection: str | None = None,
        ttl: SupportsFloat | None = None,
    ) -> None:
        for key in keys:
            _refuse(key)
        await self.key_value.put_many(keys=keys, values=values, collection=collection, ttl=ttl)
