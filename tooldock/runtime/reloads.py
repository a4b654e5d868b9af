"""What makes the gateway reload on its own, and the line each reload leaves on stderr: SIGHUP, edits under
the tools directory (`serve --watch`, process backend) and, on the docker backend, containers coming and
going; with a shared state store, a reload on another replica. `POST /reload` answers its caller with the
result instead."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from tooldock.errors import StateUnavailable
from tooldock.runtime.backend import Backend, Delegating, Watching
from tooldock.runtime.filewatch import follow, shown
from tooldock.runtime.registry import Registry
from tooldock.secrets.files import private_dir
from tooldock.state import RESYNC, Store

RELOADS = "reloads"  # the state store's channel on which replicas announce their reloads


def summary(result: dict[str, Any], seconds: float) -> str:
    """A reload's result in one line: what restarted, what went away, what failed and why (a namespace that
    failed keeps serving its previous version, when it had one)."""
    parts = [f"restarted {', '.join(result.get('workers_restarted') or []) or 'nothing'}"]
    if result.get("removed"):
        parts.append(f"removed {', '.join(result['removed'])}")
    failed = result.get("failed") or {}
    parts += [f"failed: {name}: {reason}" for name, reason in sorted(failed.items())]
    if result.get("not_retried"):  # said once, when it failed; an edit to it (or a reload) tries it again
        parts.append(f"still failed, unchanged: {', '.join(result['not_retried'])}")
    # A namespace that serves with a file or tool left out: without this, an edit that broke one file of
    # several read "restarted ns" and nothing more.
    problems = result.get("problems") or {}
    parts += [f"{name} leaves out: {'; '.join(lines)}" for name, lines in sorted(problems.items())]
    return f"reloaded in {seconds:.2f}s: " + "; ".join(parts)


def store_to_watch(store: Path | None) -> dict[Path, str]:
    """The secrets store's folder, to watch beside the tools directory. A missing one is made (0700, as
    `tooldock secrets` makes it), so a store set up after start is seen too: `tooldock secrets init`, then
    `set`, as the manager's prepare_secret tells the person to (before, that needed a SIGHUP). One that cannot
    be made is left out."""
    if store is None:
        return {}
    try:
        private_dir(store)
    except OSError:
        return {}
    return {store: "the secrets store"}


def serving(result: dict[str, Any], registry: Registry, where: object) -> list[str]:
    """The start-up lines: what serves, then what each namespace leaves out or why it failed."""
    entries = registry.snapshot.entries
    listed = ", ".join(f"{n} ({e.state}, {len(e.tools)} tools)" for n, e in entries.items())
    lines = [f"serving {len(result['namespaces'])} namespace(s) from {where}" + (f": {listed}" if listed else "")]
    lines += [f"{name}: failed: {reason}" for name, reason in sorted((result.get("failed") or {}).items())]
    lines += [f"{name}: {line}" for name, found in sorted((result.get("problems") or {}).items()) for line in found]
    if not result["namespaces"] and not result.get("failed") and isinstance(where, Path):
        lines.append(
            f"no namespace folders in {where} yet: a namespace is a folder of tool files, e.g. "
            f"{where / 'my-tools' / 'tools.py'} (`tooldock check {where}` says what it finds; with --watch a new "
            "folder is served once saved, else send SIGHUP)"
        )
    return lines


async def reload_and_report(
    registry: Registry, why: str, quiet: bool = False, retry_failed: bool = True, announce: bool = True
) -> None:
    """Reload, then say what happened (`quiet`: only when something did); a reload that fails leaves the
    previous snapshot serving. `retry_failed`, `announce`: see Registry.reload."""
    started = time.perf_counter()
    try:
        result = await registry.reload(retry_failed, announce)
    except Exception as exc:  # reported, and the previous snapshot keeps serving
        print(f"tooldock: {why}: reload failed: {exc}", file=sys.stderr, flush=True)
        return
    if quiet and not (result.get("workers_restarted") or result.get("removed") or result.get("failed")):
        return
    print(f"tooldock: {why}: {summary(result, time.perf_counter() - started)}", file=sys.stderr, flush=True)


class Reloads:
    """The gateway's own reload triggers, started with the app and stopped with it."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_sighup(self) -> None:
        def hup() -> None:
            print("tooldock: SIGHUP: reloading namespaces", file=sys.stderr, flush=True)
            self._spawn(reload_and_report(self.registry, "SIGHUP"))

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, hup)

    def on_backend_changes(self, backend: Backend) -> None:
        """Backends that can tell when namespaces change (docker events) trigger reloads, coalesced."""
        if not isinstance(backend, Watching):
            return
        state = {"dirty": False, "running": False}
        # A replica attached to the worker owner's workers: it follows what the owner did, without asking it
        why, announce = (
            ("the worker owner changed workers", False)
            if isinstance(backend, Delegating)
            else ("containers changed", True)
        )

        async def settle() -> None:
            try:
                while state["dirty"]:
                    state["dirty"] = False
                    await asyncio.sleep(0.2)
                    # a deploy makes several events (create, start, a health status): said once, when it counts
                    await reload_and_report(self.registry, why, quiet=True, announce=announce)
            finally:
                state["running"] = False

        def changed() -> None:
            state["dirty"] = True
            if not state["running"]:
                state["running"] = True
                self._spawn(settle())

        backend.watch(changed)

    async def on_edits(self, root: Path, debounce_ms: int, store: Path | None = None) -> None:
        """`serve --watch`: one reload per burst of edits under the tools directory and the secrets store's
        directory (`tooldock secrets set` then needs no signal). Returns once edits are seen."""

        async def reload(names: list[str]) -> None:
            # A namespace that failed is not started again for an edit elsewhere: it would fail as it did (a
            # requirement that does not install would cost a uv run per edit). SIGHUP and POST /reload retry.
            await reload_and_report(self.registry, f"changed: {shown(names)}", retry_failed=False)

        watching = await follow("tooldock", root, debounce_ms, reload, store_to_watch(store))
        self._spawn(watching)  # already a task: kept with the others, cancelled on close

    def share(self, store: Store, replica: str) -> None:
        """Replicas sharing a state store reload together: a reload here (SIGHUP, `POST /reload`, the manager's
        `reload_core`, an edit seen by `--watch`) is announced on the store, and one announced by another
        replica is done here too, without announcing it again. Each replica reloads from its own view of the
        namespaces (the same tools directory or the same containers), so they converge on the same set."""
        if not store.shared:
            return

        async def tell(retry_failed: bool) -> None:
            message = json.dumps({"from": replica, "retry_failed": retry_failed})
            try:
                await store.publish(RELOADS, message)
            except StateUnavailable as exc:  # this replica reloaded; the others will at their next reload
                print(f"tooldock: the reload could not be announced to other replicas: {exc}", file=sys.stderr)

        async def listen() -> None:
            async for message in store.subscribe(RELOADS):
                if message == RESYNC:  # the store was lost: a reload announced meanwhile may be missed
                    await reload_and_report(self.registry, "state store back", quiet=True, announce=False)
                    continue
                try:
                    told = json.loads(message)
                    sender, retry = str(told["from"]), bool(told.get("retry_failed", True))
                except (ValueError, KeyError, TypeError):
                    continue
                if sender != replica:
                    await reload_and_report(self.registry, f"reload on {sender}", retry_failed=retry, announce=False)

        self.registry.announcers.append(tell)
        self._spawn(listen())

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
