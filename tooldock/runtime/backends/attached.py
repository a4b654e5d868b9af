"""The backend of a replica of `tooldock serve --replicas N` on the process backend: it runs no worker, it
attaches to those of the worker owner (`runtime/workerowner.py`), found in its manifest (`shared.py`).

Discovery reads the manifest: each namespace's folder as the owner scanned it, and the socket of the worker
that serves it (a namespace's fingerprint here includes the socket, so a new worker is a change), plus the
upstream folders of the tools directory, which each replica serves itself. A reload that starts here (SIGHUP,
`POST /reload`, the manager's `reload_core`) first asks the owner to reload (`reload_owner`), so its answer
says what changed; the manifest is then polled, and what the owner changed by itself (an edit seen by its
`--watch`, a worker replaced because it was stuck, a reload asked by another replica) reaches this replica
as a reload of its own (`watch`), which swaps its attached workers as a reload swaps process workers.

An attached worker is one connection to the owner's worker; when the worker dies it reconnects to the same
socket once the owner has restarted it (calls wait for it, as for a restart in one gateway); whether the
worker failed or crash-loops is the owner's to say (its status in the manifest).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tooldock.errors import ReloadFailed, ToolDockError
from tooldock.namespace.models import NamespaceSource, ScanResult
from tooldock.namespace.scanner import scan_tools_dir
from tooldock.runtime.backend import WorkerState
from tooldock.runtime.backends.connected import ConnectedWorker
from tooldock.runtime.backends.shared import (
    MANIFEST,
    POLL,
    USING,
    ask_owner,
    layout,
    problem_from_json,
    source_from_json,
    write_using,
)
from tooldock.runtime.settings import Settings
from tooldock.runtime.workerclient import SecretEnv, SecretsDelivered, WorkerConnection

OWNER_DOWN = ("failed", "crash_loop", "stopped")
MANIFEST_WAIT = 900.0  # seconds a replica waits for the owner's first manifest (it may build virtualenvs)


class AttachedWorker(ConnectedWorker):
    """One replica's connection to a worker the owner runs."""

    def __init__(self, backend: AttachedBackend, source: NamespaceSource, socket: Path, secrets: SecretEnv) -> None:
        self._own: WorkerState = "starting"
        self.backend = backend
        super().__init__(source.name, backend.settings, socket, None, secrets)

    @property
    def state(self) -> WorkerState:
        owner = self.backend.status_of(self.socket_path).get("state")
        if self._own != "ready" and owner in OWNER_DOWN:
            return owner
        return self._own

    @state.setter
    def state(self, value: WorkerState) -> None:
        self._own = value

    async def _supervise(self) -> None:
        """Connect, serve until the connection ends, connect again (the owner restarts the worker)."""
        delay = 0.02
        while not self._stopping:
            if self.backend.status_of(self.socket_path).get("state") in OWNER_DOWN:
                self.last_error = self.backend.status_of(self.socket_path).get("last_error")
                self._settled.set()
                await asyncio.sleep(POLL)
                continue
            try:
                conn = await WorkerConnection.open(self.namespace, self.socket_path, None)
            except (OSError, SecretsDelivered, ToolDockError):
                await asyncio.sleep(delay)
                delay = min(0.25, delay * 2)
                continue
            delay = 0.02
            await self._serve(conn)
            if not self._stopping:
                self.state = "restarting"

    async def stuck(self, reason: str) -> None:
        """The owner replaces it (a fresh worker beside it, as one gateway does); this replica follows."""
        self._log_line(f"[{self.namespace}] the worker is stuck: {reason}; asking the worker owner to replace it")
        with contextlib.suppress(OSError):
            await ask_owner(self.backend.shared, {"op": "stuck", "socket": str(self.socket_path), "reason": reason}, 10)

    async def stop(self, drain_timeout: float) -> None:
        """Let this replica's calls on it finish (bounded), then let go: the worker is the owner's to stop."""
        await super().stop(drain_timeout)
        self.backend.forget(self)

    def status(self) -> dict[str, Any]:
        owner = self.backend.status_of(self.socket_path)
        status = super().status()
        status.update(restarts=owner.get("restarts") or 0, last_error=owner.get("last_error"))
        if self.backend.reload_error_of(self.socket_path):
            status["reload_error"] = self.backend.reload_error_of(self.socket_path)
        return status


class AttachedBackend:
    name = "process"  # what it serves is the process backend's, run by the owner
    follows_owner = True

    def __init__(self, settings: Settings, tools_dir: Path, shared: Path) -> None:
        self.settings, self.tools_dir, self.shared = settings, tools_dir, shared
        self._manifest: dict[str, Any] = {}
        self._seen: tuple[int, int] | None = None  # the manifest file read last (inode, mtime)
        self._served: dict[str, Any] | None = None  # its layout at the last discovery
        self._using: dict[AttachedWorker, str] = {}
        self._watch: asyncio.Task[None] | None = None

    # -- the manifest ----------------------------------------------------------------------------------

    def _read(self) -> bool:
        """Read the manifest if it changed; whether it did."""
        path = self.shared / MANIFEST
        try:
            stat = path.stat()
            if (stat.st_ino, stat.st_mtime_ns) == self._seen:
                return False
            self._manifest = json.loads(path.read_bytes())
            self._seen = (stat.st_ino, stat.st_mtime_ns)
        except (OSError, ValueError):
            return False
        return True

    def _entry(self, socket: Path) -> dict[str, Any]:
        """The manifest's entry of the worker on `socket` ({}: not listed any more, being replaced)."""
        found = (e for e in (self._manifest.get("namespaces") or {}).values() if e.get("socket") == str(socket))
        return next(found, {})

    def status_of(self, socket: Path) -> dict[str, Any]:
        return dict(self._entry(socket).get("status") or {})

    def reload_error_of(self, socket: Path) -> str | None:
        return self._entry(socket).get("reload_error")

    async def discover(self) -> ScanResult:
        deadline = time.monotonic() + MANIFEST_WAIT
        while not self._read() and not self._manifest:
            if time.monotonic() > deadline:
                raise OSError(f"the worker owner wrote no manifest in {self.shared} within {MANIFEST_WAIT:g}s")
            await asyncio.sleep(0.1)
        sources = []
        for _, entry in sorted((self._manifest.get("namespaces") or {}).items()):
            source = source_from_json(entry["source"])
            if entry.get("socket") is None:  # nothing to run: no files to attach to
                source = dataclasses.replace(source, files=())
            sources.append(dataclasses.replace(source, fingerprint=f"{source.fingerprint}@{entry.get('socket')}"))
        problems = [problem_from_json(p) for p in self._manifest.get("problems") or []]
        if self.tools_dir.is_dir():  # upstream folders: served by each replica itself, as with one gateway
            upstream = await asyncio.to_thread(scan_tools_dir, self.tools_dir, True)
            sources += [s for s in upstream.namespaces if s.name not in self._manifest.get("namespaces", {})]
        self._served = layout(self._manifest)
        return ScanResult(tuple(sources), tuple(problems))

    def create(self, source: NamespaceSource, secrets: SecretEnv) -> AttachedWorker:
        socket = (self._manifest.get("namespaces") or {})[source.name]["socket"]
        worker = AttachedWorker(self, source, Path(socket), secrets)
        self._using[worker] = socket
        self._write_using()
        return worker

    def forget(self, worker: AttachedWorker) -> None:
        if self._using.pop(worker, None) is not None:
            self._write_using()

    def _write_using(self) -> None:
        with contextlib.suppress(OSError):
            write_using(self.shared, set(self._using.values()))

    # -- what the owner does -----------------------------------------------------------------------------

    async def reload_owner(self, retry_failed: bool) -> dict[str, Any]:
        """A reload that starts on this replica: the owner reloads first (its answer comes once its manifest
        says what it runs now); what it found failed is this reload's answer too."""
        from tooldock.state import replica_name

        message = {"op": "reload", "retry_failed": retry_failed, "from": replica_name()}
        try:
            # the owner may install a namespace's requirements and start its worker: that long, and then some
            return await ask_owner(self.shared, message, self.settings.worker_start_timeout * 2 + 60)
        except OSError as exc:
            raise ReloadFailed(f"reload failed, still serving the previous namespaces: {exc}") from None

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` when the owner's workers changed (not their statuses, which are read as they are)."""

        async def follow() -> None:
            while True:
                await asyncio.sleep(POLL)
                self._read()
                if self._served is not None and layout(self._manifest) != self._served:
                    on_change()  # again at each look until a reload has discovered it (one that failed too)

        self._watch = asyncio.ensure_future(follow())

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        with contextlib.suppress(OSError):
            (self.shared / USING / str(os.getpid())).unlink()
