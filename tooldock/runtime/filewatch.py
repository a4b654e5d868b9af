"""Edits under a tools directory, in bursts (seed 000's ENABLE_FS_WATCHER, FS_WATCHER_DEBOUNCE_MS): the
gateway's `serve --watch` and the manager's watcher both reload once per burst. watchfiles (Rust `notify`)
collects a burst: it yields once no new change has arrived for the debounce time (or after ten times that
in a burst that never pauses), so saving ten files is one reload. Changes made while the caller is busy
(a reload installing requirements) are kept and come as the next burst."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from watchfiles import Change, awatch

IGNORED_PARTS = ("__pycache__", ".git")
IGNORED_SUFFIXES = (".pyc", ".tmp", ".sock", ".lock")  # editors' and our own temp files, the builder's lock


def relevant(change: Change, path: str) -> bool:
    parts = Path(path).parts
    if any(p in IGNORED_PARTS for p in parts) or path.endswith(IGNORED_SUFFIXES):
        return False
    return not Path(path).name.startswith(".")


async def bursts(root: Path, debounce_ms: int) -> AsyncIterator[list[str]]:
    """Each burst of relevant edits under `root`, as sorted paths relative to it."""
    async for changes in awatch(
        root, watch_filter=relevant, debounce=debounce_ms * 10, step=debounce_ms, recursive=True
    ):
        yield sorted({Path(p).relative_to(root).as_posix() for _, p in changes})


def shown(names: list[str]) -> str:
    """The first few changed paths, for a log line."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
