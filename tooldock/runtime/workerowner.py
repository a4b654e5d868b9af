"""The worker owner of `tooldock serve --replicas N` on the process backend: one process that runs every
namespace's worker for all the replicas, and serves no HTTP.

It is the registry and the process backend of a gateway without its front ends: it scans the tools directory,
starts, supervises, restarts and hot-swaps the workers, applies the secrets, watches the tools directory
(`--watch`) and reloads on SIGHUP; what it runs it publishes in the manifest the replicas follow
(`backends/shared.py` says what they share, `backends/attached.py` how a replica uses it).

Why a child of `serve` of its own and not `serve` itself (the parent outlives the replicas too): the parent
holds the listening socket, and everything stops when it dies, so it runs as little as can fail (no imports
of the gateway, no uv runs, no tool code's fork servers, no event loop in a thread beside the `fork` of each
replica it starts). A worker owner that dies is restarted by the parent like a replica; its workers end with
it (they follow their parent process) and the new owner's take over, which the replicas pick up from the
manifest as they pick up a reload.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tooldock.namespace.models import NamespaceSource, ScanResult
from tooldock.runtime.backends.process import ProcessBackend, ProcessWorker
from tooldock.runtime.backends.shared import (
    CONTROL,
    POLL,
    layout,
    source_to_json,
    used_by_replicas,
    write_manifest,
)
from tooldock.runtime.registry import Registry
from tooldock.runtime.reloads import Reloads, serving, summary
from tooldock.runtime.secretmap import SecretMap
from tooldock.runtime.settings import Settings
from tooldock.runtime.workerclient import SecretEnv

READY_LINE = "tooldock: ready on "  # what the parent waits for (`cli/replicas.py` READY)


class OwnedWorker(ProcessWorker):
    """A process worker that replicas call, not this process: it never idles out (its caller count here stays
    0; scale to zero needs the replicas' calls counted, not done yet) and, replaced, it is stopped only once
    no live replica may still call it (their `using` files), then drained as usual."""

    def __init__(self, backend: OwnerBackend, source: NamespaceSource, generation: int, secrets: SecretEnv) -> None:
        super().__init__(backend, source, generation, secrets)
        self.idle_timeout = None
        self.shared = backend.shared

    async def stop(self, drain_timeout: float) -> None:
        deadline = time.monotonic() + drain_timeout
        while used_by_replicas(self.shared, str(self.socket_path)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await super().stop(drain_timeout)


class OwnerBackend(ProcessBackend):
    """The process backend, without the upstream namespaces (each replica runs those itself: they are served
    by the gateway process, not by a worker)."""

    def __init__(self, settings: Settings, tools_dir: Path, shared: Path) -> None:
        super().__init__(settings, tools_dir)
        self.shared = shared

    async def discover(self) -> ScanResult:
        scan = await super().discover()
        return ScanResult(tuple(s for s in scan.namespaces if not s.is_upstream), scan.problems)

    def create(self, source: NamespaceSource, secrets: SecretEnv) -> OwnedWorker:
        return OwnedWorker(self, source, next(self._generations), secrets)


def manifest_of(registry: Registry) -> dict[str, Any]:
    snapshot = registry.snapshot
    namespaces = {}
    for name, entry in snapshot.entries.items():
        worker = entry.worker
        status = worker.status() if worker is not None else {"state": entry.state}
        namespaces[name] = {
            "source": source_to_json(entry.source),
            "socket": str(worker.socket_path) if isinstance(worker, ProcessWorker) else None,
            "status": {k: status.get(k) for k in ("state", "pid", "restarts", "last_error")},
            "reload_error": entry.reload_error,
        }
    return {"namespaces": namespaces, "problems": [p.to_dict() for p in snapshot.problems]}


class Owner:
    def __init__(self, tools_dir: Path, settings: Settings, secrets: SecretMap | None, shared: Path) -> None:
        # Its own liveness pings would judge a worker busy with the replicas' calls as idle (and replace it
        # when a long call holds its event loop): off here; a replica's stuck check asks for a replacement.
        self.settings = dataclasses.replace(settings, liveness_interval=None)
        self.tools_dir, self.shared = tools_dir, shared
        self.backend = OwnerBackend(self.settings, tools_dir, shared)
        self.registry = Registry(self.backend, self.settings, secrets)
        self.reloads = Reloads(self.registry)
        self._written: dict[str, Any] | None = None
        self._layout: dict[str, Any] | None = None

    def publish(self) -> None:
        """Write the manifest when anything in it changed (and say when the workers did)."""
        manifest = manifest_of(self.registry)
        if manifest == self._written:
            return
        write_manifest(self.shared, manifest)
        self._written = manifest
        if self._layout is not None and layout(manifest) != self._layout:
            changed = sorted(n for n in set(layout(manifest)) | set(self._layout)
                             if layout(manifest).get(n) != self._layout.get(n))  # fmt: skip
            print(f"tooldock: the replicas now call the new workers of: {', '.join(changed)}", file=sys.stderr)
        self._layout = layout(manifest)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(POLL)
            try:
                self.publish()
            except OSError as exc:
                print(f"tooldock: cannot write the workers' manifest: {exc}", file=sys.stderr, flush=True)

    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(await reader.readline())
            answer: dict[str, Any] = {"ok": True, "result": await self._handle(request)}
        except Exception as exc:  # the replica reports it as its reload's failure
            answer = {"ok": False, "error": str(exc)}
        with contextlib.suppress(OSError):
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
            writer.close()

    async def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("op") == "reload":
            started = time.perf_counter()
            result = await self.registry.reload(bool(request.get("retry_failed", True)), announce=False)
            self.publish()  # before the answer: the replica reads the manifest next
            why = f"reload asked by replica {request.get('from') or '?'}"
            print(f"tooldock: {why}: {summary(result, time.perf_counter() - started)}", file=sys.stderr, flush=True)
            return result
        if request.get("op") == "stuck":
            for entry in self.registry.snapshot.entries.values():
                worker = entry.worker
                if isinstance(worker, ProcessWorker) and str(worker.socket_path) == request.get("socket"):
                    self.registry._spawn(worker.stuck(str(request.get("reason") or "stuck")))
                    return {"replacing": entry.source.name}
            return {}
        raise ValueError(f"unknown request {request.get('op')!r}")

    async def run(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        secrets = self.registry.secrets
        control = self.shared / CONTROL
        try:
            if self.settings.watch:  # first: an edit made while workers start is seen
                await self.reloads.on_edits(
                    self.tools_dir, self.settings.watch_debounce_ms, secrets.store.directory if secrets else None
                )
            report = await self.registry.reload(announce=False)
            for line in serving(report, self.registry, self.tools_dir):
                print(f"tooldock: {line}", file=sys.stderr, flush=True)
            self.publish()
            control.unlink(missing_ok=True)
            server = await asyncio.start_unix_server(self._control, str(control), limit=2**20)
            self.reloads.on_sighup()
            follow = asyncio.create_task(self._follow())
            print(f"{READY_LINE}{control} (the workers of every replica)", file=sys.stderr, flush=True)
            async with server:
                await stop.wait()
            follow.cancel()
        finally:
            await self.reloads.close()
            await self.registry.close()
            await self.backend.close()
            control.unlink(missing_ok=True)
