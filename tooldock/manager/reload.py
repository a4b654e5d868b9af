"""`reload_core`: rebuild what changed (docker backend), then signal the gateway, one reload at a time.

Callers that arrive while a reload runs wait for the next one, and one reload answers all of them: a burst
of edits (or of LLM calls) costs one rebuild, and nobody gets an answer from a reload that started before
their change was on disk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tooldock.manager.gateway import GatewayClient

# Builds and deploys changed namespaces, removes deleted ones' containers:
# {"images_built": {ns: digest}, "build_failed": {ns: reason}, "containers_removed": {ns: [container]}}.
Rebuild = Callable[[], Awaitable[dict[str, Any]]]


class Reloader:
    def __init__(self, gateway: GatewayClient, rebuild: Rebuild | None = None) -> None:
        self.gateway, self.rebuild = gateway, rebuild
        self._lock = asyncio.Lock()
        self._requested = 0  # tickets handed out
        self._covered = 0  # every ticket up to this one has been answered by a finished reload
        self._last: dict[str, Any] = {}
        self._retry_asked = 0  # the last ticket that wants failed namespaces started again
        self.count = 0

    async def reload_core(self, retry_failed: bool = True) -> dict[str, Any]:
        """`retry_failed=False` (the file watcher's reload): a namespace that failed and has not changed is
        left as it is, unless a caller waiting for the same run asks for a retry (an LLM's reload_core)."""
        self._requested += 1
        ticket = self._requested
        if retry_failed:
            self._retry_asked = ticket
        async with self._lock:
            if self._covered >= ticket:
                return {**self._last, "shared": True}
            covers = self._requested  # this run reads the disk after every one of these requests
            result = await self._run(self._retry_asked > self._covered)
            self._covered, self._last = covers, result
            return result

    async def _run(self, retry_failed: bool) -> dict[str, Any]:
        started = time.perf_counter()
        built: dict[str, Any] = {"images_built": {}, "build_failed": {}}
        if self.rebuild is not None:
            built = await self.rebuild()
        report = await self.gateway.reload(retry_failed)
        self.count += 1
        failed = dict(report.get("failed") or {})
        failed.update(built.get("build_failed") or {})
        result = {**report, "failed": failed, "seconds": round(time.perf_counter() - started, 3)}
        if self.rebuild is not None:
            result["images_built"] = built.get("images_built") or {}
            result["containers_removed"] = built.get("containers_removed") or {}
        return result
