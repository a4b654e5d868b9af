"""The manager's file watcher (seed 000: ENABLE_FS_WATCHER, FS_WATCHER_DEBOUNCE_MS): each burst of edits
under the tools directory (runtime.filewatch) is one `reload_core`, which on the docker backend rebuilds
the changed namespaces before the gateway swaps them in."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tooldock.errors import ManagerError
from tooldock.manager.reload import Reloader
from tooldock.runtime.filewatch import follow, shown
from tooldock.runtime.reloads import store_to_watch, summary


async def watch(root: Path, reloader: Reloader, debounce_ms: int, store: Path | None = None) -> asyncio.Task[None]:
    """Start watching `root` and the secrets store's folder `store` (`tooldock secrets set`); returns the
    watching task once edits are seen."""

    async def reload(names: list[str]) -> None:
        print(f"tooldock manager: changed: {shown(names)}; reloading", file=sys.stderr, flush=True)
        try:
            result = await reloader.reload_core(retry_failed=False)  # as the gateway's own watcher
        except ManagerError as exc:
            print(f"tooldock manager: reload failed: {exc.message}", file=sys.stderr, flush=True)
            return
        print(f"tooldock manager: {summary(result, result.get('seconds') or 0.0)}", file=sys.stderr, flush=True)

    return await follow("tooldock manager", root, debounce_ms, reload, store_to_watch(store))
