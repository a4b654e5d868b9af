"""The file watcher (seed 000: ENABLE_FS_WATCHER, FS_WATCHER_DEBOUNCE_MS): edits under the tools directory
trigger one `reload_core` per burst. watchfiles (Rust `notify`) collects the burst: it yields once no new
change has arrived for the debounce time (or after ten times that in a burst that never pauses), so saving
ten files is one reload, and an edit is live after the debounce time plus one reload."""

from __future__ import annotations

import sys
from pathlib import Path

from watchfiles import Change, awatch

from tooldock.errors import ManagerError
from tooldock.manager.reload import Reloader

IGNORED_PARTS = ("__pycache__", ".git")
IGNORED_SUFFIXES = (".pyc", ".tmp", ".sock", ".lock")  # editors' and our own temp files, the builder's lock


def relevant(change: Change, path: str) -> bool:
    parts = Path(path).parts
    if any(p in IGNORED_PARTS for p in parts) or path.endswith(IGNORED_SUFFIXES):
        return False
    return not Path(path).name.startswith(".")


async def watch(root: Path, reloader: Reloader, debounce_ms: int) -> None:
    print(f"tooldock manager: watching {root} (debounce {debounce_ms} ms)", file=sys.stderr, flush=True)
    async for changes in awatch(
        root, watch_filter=relevant, debounce=debounce_ms * 10, step=debounce_ms, recursive=True
    ):
        names = sorted({Path(p).relative_to(root).as_posix() for _, p in changes})
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        print(f"tooldock manager: changed: {shown}; reloading", file=sys.stderr, flush=True)
        try:
            result = await reloader.reload_core()
        except ManagerError as exc:
            print(f"tooldock manager: reload failed: {exc.message}", file=sys.stderr, flush=True)
            continue
        failed = result.get("failed") or {}
        print(
            f"tooldock manager: reloaded in {result.get('seconds')}s: restarted "
            f"{', '.join(result.get('workers_restarted') or []) or 'nothing'}"
            + (f"; failed: {', '.join(failed)}" if failed else ""),
            file=sys.stderr,
            flush=True,
        )
