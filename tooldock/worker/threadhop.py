"""How a worker runs a sync tool (or a sync resource or prompt) off its event loop: one hand-off to a pool
thread and one back, instead of fastmcp's `anyio.to_thread.run_sync`.

anyio's hop holds a capacity limiter, enters cancel scopes and looks up its backend on every call: for a
cheap tool it was half of the worker's CPU per call (measured in process: 100 us a call with it, 60 us
with this). The stand-in keeps what fastmcp relies on: the function runs in a thread, never on the loop,
with the caller's context variables (`contextvars.copy_context`), at most MAX_THREADS at once (anyio's
default limit), and its return value or exception comes back to the awaiting task. One difference, on
purpose: a caller that is cancelled (the gateway gave up, a fastmcp tool `timeout`) stops waiting at once,
as `loop.run_in_executor` does, instead of waiting for the thread; the thread finishes on its own and its
result is dropped. Python cannot stop a thread, so such a thread is listed in `abandoned()` until it returns:
the worker's `ping` reports it, and the gateway replaces a worker whose abandoned thread runs on
(`runtime/backends/stuck.py`). The threads are daemons, so a tool stuck in a loop never holds up a stopping
worker (`concurrent.futures` joins its threads at exit, which is why it is not used here).

`install()` points fastmcp's modules at `run_sync`; `tests/test_worker.py` checks that each name it
replaces still exists in the pinned fastmcp, so an upgrade that moves one fails loudly.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import importlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_THREADS = 40  # anyio's default thread limit, which fastmcp used
IDLE_SECONDS = 10.0  # a pool thread idle this long ends (anyio's WorkerThread.MAX_IDLE_TIME)
# The fastmcp modules that import `call_sync_fn_in_threadpool` by name, for sync tools, resources,
# resource templates, prompts and dependencies.
PATCHED = (
    "fastmcp.tools.function_tool",
    "fastmcp.tools.tool_transform",
    "fastmcp.resources.function_resource",
    "fastmcp.resources.template",
    "fastmcp.prompts.function_prompt",
    "fastmcp.server.dependencies",
    "fastmcp.server.mixins.mcp_operations",
)

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]]


class _Thread:
    """An idle pool thread's mailbox: the job handed to it, and the lock it sleeps on until then."""

    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.job: _Job | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


class _Pool:
    """Threads that run one job at a time. An idle thread sleeps on a lock of its own, and a job goes to
    the thread that went idle last (anyio's rule too): with one queue that every idle thread waited on,
    jobs went round all the threads a burst had started, and after a burst of 16 concurrent calls a call
    at a time cost the worker twice the CPU (210 us against 110: sixteen threads taking turns, each cold in
    the caches) and the gateway 40% more, until the worker was replaced. A thread idle for IDLE_SECONDS
    ends (anyio's rule as well), so a burst's threads do not stay."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Thread] = []  # the last to go idle at the end
        self._waiting: collections.deque[_Job] = collections.deque()  # jobs while MAX_THREADS are busy
        self._threads = 0

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self._idle:
                thread = self._idle.pop()
            elif self._threads < MAX_THREADS:
                self._threads += 1
                thread = None
            else:
                self._waiting.append(job)  # as under anyio's limit: the next thread to finish takes it
                return
        if thread is None:  # its mailbox, not the job, is the new thread's argument (held while it lives)
            thread = _Thread()
            thread.job = job
            threading.Thread(target=self._run, args=(thread,), name="tooldock-tool", daemon=True).start()
        else:
            thread.job = job
            thread.wake.release()

    def _run(self, me: _Thread) -> None:
        while True:
            job, me.job = me.job, None
            assert job is not None
            done = _do(job)
            del job  # hold nothing while idle
            with self._lock:
                took = bool(self._waiting)
                if took:
                    me.job = self._waiting.popleft()
                else:
                    self._idle.append(me)
            # Handed back only now that this thread is idle again: the caller's next job, often sent as soon
            # as this result arrives, finds this thread last in `_idle` (before, it could go to another one).
            _hand_back(*done)
            del done
            if took:
                continue
            if not me.wake.acquire(timeout=IDLE_SECONDS):
                with self._lock:
                    if me in self._idle:  # still idle: nobody handed it a job, so it ends
                        self._idle.remove(me)
                        self._threads -= 1
                        return
                me.wake.acquire()  # a job was handed to it as it timed out: the release is on its way


def _do(job: _Job) -> tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Any, BaseException | None]:
    """Run the job: what `_hand_back` gives its caller."""
    loop, future, context, fn = job
    try:
        return loop, future, context.run(fn), None
    except BaseException as exc:  # handed to the caller, like any result
        return loop, future, None, exc


def _hand_back(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    try:
        loop.call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # the loop is closed: nobody is waiting
        pass


# What the request being served runs (its tool, prompt or resource), set by the worker's connection: the
# name `abandoned()` gives (the function a thread runs may be a wrapper of fastmcp's).
calling: contextvars.ContextVar[str | None] = contextvars.ContextVar("calling", default=None)
# Calls whose caller gave up while their thread still runs: future -> (function name, when it was given up).
# Touched on the event loop's thread only (run_sync and _settle).
_abandoned: dict[asyncio.Future[Any], tuple[str, float]] = {}


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled
        _abandoned.pop(future, None)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_pool: _Pool | None = None


def _forget_pool() -> None:  # in a forked child the parent's threads do not exist
    global _pool
    _pool = None
    _abandoned.clear()


os.register_at_fork(after_in_child=_forget_pool)


async def run_sync(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fastmcp.utilities.async_utils.call_sync_fn_in_threadpool`, with the same signature."""
    global _pool
    if _pool is None:
        _pool = _Pool()
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    _pool.submit((loop, future, contextvars.copy_context(), functools.partial(fn, *args, **kwargs)))
    try:
        return await future
    except asyncio.CancelledError:
        if not future.done() or future.cancelled():  # its thread has not handed a result back: it runs on
            _abandoned[future] = (calling.get() or getattr(fn, "__name__", None) or repr(fn), time.monotonic())
        raise


def abandoned() -> list[tuple[str, float]]:
    """The sync functions still running in a thread after their caller gave up: (name, seconds since)."""
    now = time.monotonic()
    return [(name, now - since) for name, since in _abandoned.values()]


def install() -> None:
    """Make the worker's fastmcp run sync functions through `run_sync`."""
    for name in PATCHED:
        module = importlib.import_module(name)
        if not hasattr(module, "call_sync_fn_in_threadpool"):
            raise RuntimeError(f"{name} no longer has call_sync_fn_in_threadpool: update tooldock.worker.threadhop")
        module.call_sync_fn_in_threadpool = run_sync  # type: ignore[attr-defined]
