"""Supervision shared by every backend: start a worker, wait for its ready handshake on the unix socket,
restart it with exponential backoff when it dies, drain and stop it (calls reach it through `calls.py`).

A backend supplies how a worker is launched, observed and stopped (`_prepare`, `_launch`, `_exit_code`,
`_wait_exited`, `_terminate`); everything else, including crash-loop detection, lives here once.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tooldock.errors import DependencyError
from tooldock.runtime.backend import WorkerState
from tooldock.runtime.backends.calls import WorkerCalls
from tooldock.runtime.backends.output import WorkerOutput, how_it_ended
from tooldock.runtime.backends.stuck import Replacing, StuckCheck
from tooldock.runtime.settings import Settings
from tooldock.runtime.workerclient import SecretEnv, SecretsDelivered, WorkerConnection
from tooldock.worker import protocol
from tooldock.worker.secretenv import Masker

STABLE_AFTER = 10.0  # seconds a worker must stay up for a later death not to count toward a crash loop
CRASH_LOOP_AFTER = 5  # consecutive failed starts / quick deaths
BACKOFF_MAX = 30.0


class StartFailure(Exception):
    pass


class WorkerGone(Exception):
    """The thing that ran the worker no longer exists (a removed container): stop supervising."""


class SupervisedWorker(WorkerCalls, Replacing):
    """A worker supervised by this gateway. How calls reach it is `calls.WorkerCalls`; what is done when it is
    stuck, `stuck.Replacing`."""

    kind = "worker"

    def __init__(
        self,
        namespace: str,
        settings: Settings,
        socket_path: Path,
        idle_timeout: float | None = None,
        secrets: SecretEnv | None = None,
    ) -> None:
        self.namespace, self.settings, self.socket_path = namespace, settings, socket_path
        self.secrets = secrets or SecretEnv()
        self._mask = Masker(list(self.secrets.values.values()))  # the worker's output and errors, as logged here
        self.idle_timeout = idle_timeout  # scale to zero: stop after this long without calls, start on the next
        self.last_wake_ms: float | None = None
        self.state: WorkerState = "starting"
        self.tools, self.inlined_tools, self.tool_versions = protocol.tools_of({})  # handshake's (tools_of)
        # resources, resourceTemplates, prompts: from the last handshake (kept while the worker sleeps)
        self.surface: dict[str, list[dict[str, Any]]] = {}
        self.failed_files: list[dict[str, Any]] = []
        self.plain_tools: frozenset[str] = frozenset()  # tools that take no Context (the lean MCP path's)
        self.asking_tools: frozenset[str] | None = None  # Context tools that may ask the client; None: all may
        self.deps_synced = False
        self.restarts = 0
        self.last_error: str | None = None
        self.pid: int | str | None = None
        self._conn: WorkerConnection | None = None
        self._ready = asyncio.Event()
        self._retired = asyncio.Event()  # `_stopping` (calls.py): calls waiting for it go to its successor
        self._settled = asyncio.Event()
        self._started = False  # start() has returned: a failure before is the reload's to report, not ours
        self._retiring = False  # stop() was called: the worker is going away for good (not just released)
        self._inflight = 0
        self._last_call = time.monotonic()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._output = WorkerOutput(namespace, self._mask)
        self._task: asyncio.Task[None] | None = None
        self.on_stuck: Callable[[SupervisedWorker, str], None] | None = None  # set by the registry
        self._stuck = StuckCheck(self._ping, settings.stuck_after, self.stuck)
        self._recycle: str | None = None  # why the running worker is being restarted in place

    # -- what a backend provides ---------------------------------------------------------------------

    async def _prepare(self) -> None:
        """Once, before the first launch (e.g. make the virtualenv). Raise DependencyError to fail."""

    async def _launch(self) -> None:
        raise NotImplementedError

    def _exit_code(self) -> int | None:
        """The exit status of the worker's last process (or container) once it has exited, also after
        `_terminate` let go of it; None while it runs (a new launch starts from None)."""
        raise NotImplementedError

    async def _wait_exited(self) -> None:
        raise NotImplementedError

    async def _terminate(self) -> None:
        """Make sure the launched worker is gone (called after every run, and on stop)."""
        raise NotImplementedError

    # -- supervision ---------------------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"supervise-{self.namespace}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._settled.wait()
        self._started = True
        if not self._settled.is_set():
            self.last_error = f"{self.kind} did not become ready within {timeout:g}s"

    async def _supervise(self) -> None:
        try:
            await self._prepare()
        except DependencyError as exc:
            self._fail("failed", exc.message)
            return
        failures = 0
        while not self._stopping:
            ready_at = None
            liveness: asyncio.Task[None] | None = None
            try:
                self._output.launched()
                await self._launch()
                await self._wait_ready()
                ready_at = self._last_call = time.monotonic()  # idle time counts from readiness
                self.state = "ready"
                self._ready.set()
                self._settled.set()
                if self.settings.liveness_interval is not None:
                    live = self._stuck.liveness(self.settings.liveness_interval, lambda: self._inflight == 0)
                    liveness = asyncio.create_task(live, name=f"liveness-{self.namespace}")
                if await self._wait_exit_or_idle():
                    await self._sleep()
                    continue
            except StartFailure as exc:
                self.last_error = str(exc)
            except WorkerGone as exc:
                self._fail("failed", str(exc))
                return
            except Exception as exc:  # a backend error must never end supervision silently
                self.last_error = f"{type(exc).__name__}: {exc}"
            finally:
                if liveness is not None:
                    liveness.cancel()
                self._ready.clear()
                await self._disconnect()
                await self._terminate()
            if self._stopping:
                break
            if self._recycle is not None:  # stuck (stuck.py), not crashed: no backoff, no crash-loop count
                self.restarts += 1
                self.last_error, self._recycle = f"restarted: {self._recycle}", None
                self.state = "restarting"
                await self._discard_stuck()
                continue
            if ready_at is not None:
                ended = how_it_ended(self._exit_code())
                self.last_error = f"{self.kind} exited unexpectedly ({ended}): {self._output.tail(ready=True)}"
            quick = ready_at is None or time.monotonic() - ready_at < STABLE_AFTER
            failures = failures + 1 if quick else 0
            if failures >= CRASH_LOOP_AFTER:
                self._fail(
                    "crash_loop", f"crash loop: {failures} failed starts in a row; last error: {self.last_error}"
                )
                return
            self.state = "restarting"
            self.restarts += 1
            print(
                f"tooldock: [{self.namespace}] {self.kind} died ({self.last_error}); restart #{self.restarts}",
                file=sys.stderr,
                flush=True,
            )
            await asyncio.sleep(min(BACKOFF_MAX, self.settings.restart_backoff * 2 ** max(0, failures - 1)))

    def _fail(self, state: WorkerState, message: str) -> None:
        message = self._mask(message)
        self.state, self.last_error = state, message
        if self._started:  # during start() the reload's line (or the start-up lines) say it, once
            print(f"tooldock: [{self.namespace}] {message}", file=sys.stderr, flush=True)
        self._settled.set()

    def _log_line(self, line: str) -> None:
        self._output.line(line)

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.settings.worker_start_timeout
        while True:
            code = self._exit_code()
            if code is not None:
                await asyncio.sleep(0.05)  # let the last output lines arrive
                raise StartFailure(f"{self.kind} exited with code {code} before it was ready: {self._output.tail()}")
            if self.socket_path.exists():
                try:
                    self._conn = await WorkerConnection.open(self.namespace, self.socket_path, self._deliverable())
                    break
                except (SecretsDelivered, ConnectionRefusedError, FileNotFoundError, PermissionError):
                    pass  # not yet (SecretsDelivered: it imports its tools now, then serves on a fresh socket)
            if time.monotonic() > deadline:
                raise StartFailure(f"{self.kind} did not open its socket in time: {self._output.tail()}")
            await asyncio.sleep(0.02)
        handshake = self._conn.handshake
        self.tools, self.inlined_tools, self.tool_versions = protocol.tools_of(handshake)
        self.surface = {key: list(handshake.get(key) or []) for key in protocol.SURFACE_KINDS}
        self.failed_files = list(handshake.get("failed_files") or [])
        self.plain_tools, self.asking_tools = protocol.tool_kinds(handshake)

    def _deliverable(self) -> SecretEnv | None:
        """The secrets to hand a worker that asks for them; None when another supervisor of the same
        worker (a newer generation of the namespace) is the one to answer."""
        return self.secrets

    async def _wait_exit(self) -> None:
        assert self._conn is not None
        exited = asyncio.create_task(self._wait_exited())
        closed = asyncio.create_task(self._conn.closed.wait())
        await asyncio.wait({exited, closed}, return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()
        exited.cancel()

    async def _wait_exit_or_idle(self) -> bool:
        """Wait until the worker dies (False) or, with an idle timeout, stays unused that long (True)."""
        if not self.idle_timeout:
            await self._wait_exit()
            return False
        exited = asyncio.create_task(self._wait_exit())
        try:
            while not exited.done():
                quiet = time.monotonic() - self._last_call
                if self._inflight == 0 and quiet >= self.idle_timeout:
                    return True
                await asyncio.wait({exited}, timeout=max(0.05, min(1.0, self.idle_timeout - quiet)))
            return False
        finally:
            exited.cancel()

    async def _sleep(self) -> None:
        """Scale to zero: stop the worker cleanly, then wait for the next call to wake it."""
        self._ready.clear()
        self._wake.clear()  # before the state change: a call that sees "sleeping" must be able to wake us
        self.state = "sleeping"
        print(
            f"tooldock: [{self.namespace}] idle for {self.idle_timeout:g}s: stopping the {self.kind}",
            file=sys.stderr,
            flush=True,
        )
        await self._ask_to_exit(5)
        await self._disconnect()
        await self._terminate()
        await self._wake.wait()
        self.state = "starting"

    async def _ask_to_exit(self, wait: float) -> None:
        """The worker protocol's `shutdown`, then up to `wait` seconds for the worker to exit by itself."""
        if self._conn is None:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                await self._conn.request("shutdown")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._wait_exited()

    async def _disconnect(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def stop(self, drain_timeout: float) -> None:
        self._stopping = self._retiring = True
        self._stuck.cancel()
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_timeout):
                await self._idle.wait()
        await self._ask_to_exit(3)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._disconnect()
        await self._terminate()
        self.state = "stopped"
        if self._owns_socket():
            self.socket_path.unlink(missing_ok=True)

    def _owns_socket(self) -> bool:
        """Whether the socket file is this worker's to remove when it stops (a newer container's, maybe)."""
        return True

    async def release(self) -> None:
        """The gateway is stopping. For a local process that means stopping it."""
        await self.stop(min(5.0, self.settings.drain_timeout))

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "state": self.state,
            "pid": self.pid if self.state == "ready" else None,
            "restarts": self.restarts,
            "last_error": self._mask(self.last_error) if self.last_error else None,
            "inflight": self._inflight,
        }
        if self.idle_timeout:
            status.update(idle_timeout=self.idle_timeout, last_wake_ms=self.last_wake_ms)
        return status
