"""The `process` backend: each namespace runs as a local worker process in its own virtualenv.

A `ProcessWorker` supervises one namespace: it makes sure the environment exists, starts
`python -m tooldock.worker`, waits for the ready handshake on the unix socket, and restarts the process
with exponential backoff when it dies. Repeated quick deaths are a crash loop: it stops restarting and
says so in its status until the next reload.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import itertools
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tooldock

from ..errors import DependencyError, NamespaceUnavailable
from ..namespace.models import NamespaceSource
from .backend import WorkerState
from .environments import Environments
from .settings import Settings
from .workerclient import WorkerConnection

STABLE_AFTER = 10.0  # seconds a worker must stay up for a later death not to count toward a crash loop
CRASH_LOOP_AFTER = 5  # consecutive failed starts / quick deaths
BACKOFF_MAX = 30.0
# Only these variables of the gateway's environment reach a worker: never the gateway's tokens.
PASSTHROUGH_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR")


def _worker_lib(state_dir: Path) -> Path:
    """A directory holding only a link to the `tooldock` package, for the worker's PYTHONPATH.

    Pointing PYTHONPATH at the gateway's site-packages would put the gateway's dependencies in front of
    the namespace's own; this exposes nothing but ToolDock itself.
    """
    package = Path(tooldock.__file__).resolve().parent
    lib = state_dir / "lib" / hashlib.sha256(str(package).encode()).hexdigest()[:12]
    link = lib / "tooldock"
    if not link.exists():
        lib.mkdir(parents=True, exist_ok=True)
        tmp = lib / f".tooldock-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)
    return lib


class StartFailure(Exception):
    pass


class ProcessWorker:
    def __init__(self, backend: ProcessBackend, source: NamespaceSource, generation: int) -> None:
        self.backend, self.source, self.namespace = backend, source, source.name
        self.socket_path = backend.socket_dir / f"{source.name}.{generation}.sock"
        self.state: WorkerState = "starting"
        self.tools: list[dict[str, Any]] = []
        self.failed_files: list[dict[str, Any]] = []
        self.deps_synced = False
        self.restarts = 0
        self.last_error: str | None = None
        self.pid: int | None = None
        self._conn: WorkerConnection | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()
        self._stopping = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._output: collections.deque[str] = collections.deque(maxlen=20)
        self._task: asyncio.Task[None] | None = None
        self._output_task: asyncio.Task[None] | None = None

    # -- supervision -------------------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"supervise-{self.namespace}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._settled.wait()
        if not self._settled.is_set():
            self.last_error = f"worker did not become ready within {timeout:g}s"

    async def _supervise(self) -> None:
        cfg = self.source.config
        try:
            interpreter, self.deps_synced = await self.backend.envs.ensure(
                self.namespace, self.source.path / "requirements.txt", self.source.requirements, cfg.python
            )
        except DependencyError as exc:
            self._fail("failed", exc.message)
            return
        failures = 0
        while not self._stopping:
            ready_at = None
            try:
                await self._spawn(interpreter)
                await self._wait_ready()
                ready_at = time.monotonic()
                self.state = "ready"
                self._ready.set()
                self._settled.set()
                await self._wait_exit()
            except StartFailure as exc:
                self.last_error = str(exc)
            finally:
                self._ready.clear()
                await self._reap()
            if self._stopping:
                break
            if ready_at is not None:
                self.last_error = f"worker exited unexpectedly: {self._tail()}"
            quick = ready_at is None or time.monotonic() - ready_at < STABLE_AFTER
            failures = failures + 1 if quick else 0
            if failures >= CRASH_LOOP_AFTER:
                self._fail("crash_loop", f"crash loop: {failures} failed starts in a row; last error: {self.last_error}")
                return
            self.state = "restarting"
            self.restarts += 1
            print(f"tooldock: [{self.namespace}] worker died ({self.last_error}); restart #{self.restarts}",
                  file=sys.stderr, flush=True)
            backoff = self.backend.settings.restart_backoff
            await asyncio.sleep(min(BACKOFF_MAX, backoff * 2 ** max(0, failures - 1)))

    def _fail(self, state: WorkerState, message: str) -> None:
        self.state, self.last_error = state, message
        print(f"tooldock: [{self.namespace}] {message}", file=sys.stderr, flush=True)
        self._settled.set()

    def _tail(self) -> str:
        return " | ".join(list(self._output)[-3:]) or "no output"

    async def _spawn(self, interpreter: Path) -> None:
        cfg = self.source.config
        env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        env.update(dict(cfg.env))
        env.update(PYTHONPATH=str(self.backend.lib), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        args = [str(interpreter), "-s", "-m", "tooldock.worker", "--namespace", self.namespace,
                "--dir", str(self.source.path), "--socket", str(self.socket_path),
                "--parent-pid", str(os.getpid())]
        for tool_file in self.source.files:
            args += ["--file", tool_file.filename]
        self.socket_path.unlink(missing_ok=True)
        self._output.clear()
        self._proc = await asyncio.create_subprocess_exec(
            *args, cwd=str(self.source.path), env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C on the gateway's terminal must not hit workers directly
        )
        self.pid = self._proc.pid
        self._output_task = asyncio.create_task(self._forward_output(self._proc))

    async def _forward_output(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self._output.append(line)
            print(f"[{self.namespace}] {line}" if not line.startswith(f"[{self.namespace}]") else line,
                  file=sys.stderr, flush=True)

    async def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.backend.settings.worker_start_timeout
        while True:
            if self._proc.returncode is not None:
                await asyncio.sleep(0.05)  # let the last output lines arrive
                raise StartFailure(f"worker exited with code {self._proc.returncode} before it was ready: {self._tail()}")
            if self.socket_path.exists():
                try:
                    self._conn = await WorkerConnection.open(self.namespace, self.socket_path)
                    break
                except (ConnectionRefusedError, FileNotFoundError):
                    pass
            if time.monotonic() > deadline:
                raise StartFailure("worker did not open its socket in time")
            await asyncio.sleep(0.02)
        handshake = self._conn.handshake
        self.tools = list(handshake.get("tools") or [])
        self.failed_files = list(handshake.get("failed_files") or [])

    async def _wait_exit(self) -> None:
        assert self._proc is not None and self._conn is not None
        exited = asyncio.create_task(self._proc.wait())
        closed = asyncio.create_task(self._conn.closed.wait())
        await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()
        exited.cancel()

    async def _reap(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await proc.wait()
                    return

    # -- calls -------------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.state in ("failed", "crash_loop", "stopped"):
            raise NamespaceUnavailable(
                f"namespace {self.namespace!r} is not running ({self.state}): {self.last_error}",
                {"state": self.state},
            )
        if not self._ready.is_set():
            try:
                async with asyncio.timeout(self.backend.settings.call_timeout):
                    await self._ready.wait()
            except TimeoutError:
                raise NamespaceUnavailable(f"namespace {self.namespace!r} is {self.state}; retry shortly") from None
        conn = self._conn
        if conn is None:
            raise NamespaceUnavailable(f"namespace {self.namespace!r} is {self.state}; retry shortly")
        self._inflight += 1
        self._idle.clear()
        try:
            return await conn.request("tools.call", tool=tool, arguments=arguments)
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    async def stop(self, drain_timeout: float) -> None:
        self._stopping = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_timeout):
                await self._idle.wait()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await self._conn.request("shutdown")
        if self._proc is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(3):
                    await self._proc.wait()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._reap()
        self.state = "stopped"
        self.socket_path.unlink(missing_ok=True)

    def status(self) -> dict[str, Any]:
        return {"state": self.state, "pid": self.pid if self.state == "ready" else None,
                "restarts": self.restarts, "last_error": self.last_error, "inflight": self._inflight}


class ProcessBackend:
    name = "process"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.envs = Environments(settings.state_dir / "envs")
        self.lib = _worker_lib(settings.state_dir)
        # Socket paths are limited to ~107 bytes: keep them in a short private directory.
        self.socket_dir = Path(tempfile.mkdtemp(prefix="tooldock-"))
        self._generations = itertools.count(1)

    def create(self, source: NamespaceSource) -> ProcessWorker:
        return ProcessWorker(self, source, next(self._generations))

    async def close(self) -> None:
        shutil.rmtree(self.socket_dir, ignore_errors=True)
