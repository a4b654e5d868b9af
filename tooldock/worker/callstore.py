"""What the worker server's state store wrappers (visibility.py, sessionvalues.py) share: the call whose
reads and writes they are, and batch operations taken one key at a time, so a wrapper that decides by the
key sees every key of a batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import Any, SupportsFloat

from key_value.aio.wrappers.base import BaseWrapper

# The call fastmcp's reads and writes of the state store belong to: its `bridge.Relay` (set by direct.py).
CALL: ContextVar[Any] = ContextVar("tooldock_store_call", default=None)


class PerKey(BaseWrapper):
    """A store wrapper whose batch operations are its single ones, key by key."""

    async def get_many(self, keys: Sequence[str], *, collection: str | None = None) -> list[dict[str, Any] | None]:
        return [await self.get(key, collection=collection) for key in keys]

    async def ttl_many(
        self, keys: Sequence[str], *, collection: str | None = None
    ) -> list[tuple[dict[str, Any] | None, float | None]]:
        return [await self.ttl(key, collection=collection) for key in keys]

    async def put_many(
        self,
        keys: Sequence[str],
        values: Sequence[Mapping[str, Any]],
        *,
        collection: str | None = None,
        ttl: SupportsFloat | None = None,
    ) -> None:
        for key, value in zip(keys, values, strict=True):
            await self.put(key, value, collection=collection, ttl=ttl)

    async def delete_many(self, keys: Sequence[str], *, collection: str | None = None) -> int:
        return sum([await self.delete(key, collection=collection) for key in keys])
