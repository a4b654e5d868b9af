"""Edits under a tools directory, in bursts (seed 000's ENABLE_FS_WATCHER, FS_WATCHER_DEBOUNCE_MS): the
gateway's `serve --watch` and the manager's watcher both reload once per burst. watchfiles (Rust `notify`)
collects a burst: it yields once no new change has arrived for the debounce time (or after ten times that
in a burst that never pauses), so saving ten files is one reload. Changes made while the caller is busy
(a reload installing requirements) are kept and come as the next burst."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from watchfiles import Change, awatch

IGNORED_PARTS = ("__pycache__", ".git")
IGNORED_SUFFIXES = (".pyc", ".tmp", ".sock", ".lock")  # editors' and our own temp files, the builder's lock


def relevant(change: Change, path: str) -> bool:
    parts = Path(path).parts
    if any(p in IGNORED_PARTS for p in parts) or path.endswith(IGNORED_SUFFIXES):
        return False
    return not Path(path).name.startswith(".")


async def bursts(root: Path, debounce_ms: int, labels: dict[Path, str]) -> AsyncIterator[list[str]]:
    """Each burst of relevant edits under `root` (as sorted paths relative to it) and under the folders of
    `labels`, each named by its label (`{store_dir: "the secrets store"}`)."""
    async for changes in awatch(
        root, *labels, watch_filter=relevant, debounce=debounce_ms * 10, step=debounce_ms, recursive=True
    ):
        names = sorted({name for _, p in changes if (name := _named(Path(p), root, labels)) not in (".", None)})
        if names:
            yield names


def _named(path: Path, root: Path, labels: dict[Path, str]) -> str | None:
    """What a changed path is called in the log; None for a watched folder itself (its own attributes, such as
    a chmod another process makes: nothing in it changed)."""
    if path.is_relative_to(root):
        return path.relative_to(root).as_posix()
    if path in labels:
        return None
    return next((label for folder, label in labels.items() if path.is_relative_to(folder)), str(path))


async def follow(
    who: str,
    root: Path,
    debounce_ms: int,
    on_burst: Callable[[list[str]], Awaitable[None]],
    also: dict[Path, str] | None = None,
) -> asyncio.Task[None]:
    """Call `on_burst` with each burst's names, one at a time, in a task; returns once the task's watches are
    in place, so an edit made after this returns is seen (the task's first step creates them, through
    watchfiles' RustNotify, before it first waits). `who` starts the log lines. Folders of `also` that do
    not exist are left out."""
    labels = {folder: label for folder, label in (also or {}).items() if folder.is_dir()}

    async def run() -> None:
        try:
            async for names in bursts(root, debounce_ms, labels):
                await on_burst(names)
        except (OSError, RuntimeError) as exc:  # the folder went away or cannot be watched: say so
            print(f"{who}: stopped watching {root}: {exc}", file=sys.stderr, flush=True)

    task = asyncio.ensure_future(run())
    await asyncio.sleep(0)
    watched = " and ".join(str(folder) for folder in (root, *labels))
    print(f"{who}: watching {watched} (debounce {debounce_ms} ms)", file=sys.stderr, flush=True)
    return task


def shown(names: list[str]) -> str:
    """The first few changed paths, for a log line."""
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
