"""How a worker runs sync tools (worker/threadhop.py): off the event loop, with the caller's context, at
most MAX_THREADS at once, errors handed back, a cancelled caller released at once, and daemon threads."""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import threading
import time

import pytest
from fastmcp.tools import FunctionTool
from test_worker import WorkerProc
from conftest import FIXTURES

from tooldock.worker import threadhop

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


def test_install_points_every_fastmcp_module_at_run_sync():
    threadhop.install()
    for name in threadhop.PATCHED:
        assert importlib.import_module(name).call_sync_fn_in_threadpool is threadhop.run_sync, name


def test_a_sync_tool_runs_in_a_thread_with_the_callers_context():
    threadhop.install()

    def seen(label: str) -> dict:
        return {"label": label, "context": where.get(), "thread": threading.get_ident()}

    tool = FunctionTool.from_function(seen)

    async def main() -> dict:
        where.set("the caller's")
        result = await tool.run({"label": "x"})
        return {**result.structured_content, "loop": threading.get_ident()}

    got = asyncio.run(main())
    assert got["label"] == "x" and got["context"] == "the caller's"
    assert got["thread"] != got["loop"]


def test_errors_come_back_with_their_type():
    def boom() -> None:
        raise KeyError("kaput")

    async def main() -> None:
        await threadhop.run_sync(boom)

    with pytest.raises(KeyError, match="kaput"):
        asyncio.run(main())


def test_calls_run_side_by_side_up_to_the_limit(monkeypatch):
    monkeypatch.setattr(threadhop, "MAX_THREADS", 2)
    pool = threadhop._Pool()
    monkeypatch.setattr(threadhop, "_pool", pool)
    running, peak, lock = [0], [0], threading.Lock()

    def work() -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1

    async def main() -> float:
        started = time.monotonic()
        await asyncio.gather(*(threadhop.run_sync(work) for _ in range(4)))
        return time.monotonic() - started

    elapsed = asyncio.run(main())
    assert peak[0] == 2 and pool._threads == 2  # two at a time: four calls take two rounds
    assert 0.35 < elapsed < 2


def test_a_cancelled_caller_stops_waiting_and_the_thread_finishes():
    finished = threading.Event()

    def slow() -> str:
        time.sleep(0.5)
        finished.set()
        return "late"

    async def main() -> float:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await threadhop.run_sync(slow)
        return time.monotonic() - started

    assert asyncio.run(main()) < 0.4
    assert finished.wait(5)


def test_a_stuck_sync_tool_does_not_hold_up_a_stopping_worker():
    worker = WorkerProc(FIXTURES / "tools" / "testing")
    try:
        worker.send({"id": "stuck", "op": "tools.call", "tool": "slow", "arguments": {"seconds": 120}})
        time.sleep(0.3)
        assert worker.request(id="s", op="shutdown")["result"] == {"stopping": True}
        worker.proc.wait(30)  # in-flight calls get 5 s; the tool's thread is a daemon
        assert worker.proc.returncode == 0
    finally:
        worker.close()
