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


def test_after_a_burst_calls_one_at_a_time_go_to_one_thread(monkeypatch):
    """A job goes to the thread that went idle last: after a burst started several threads, calls one at a
    time keep to one (they went round all of them, each cold in the caches, at twice the worker's CPU)."""
    monkeypatch.setattr(threadhop, "_pool", threadhop._Pool())
    gate = threading.Barrier(4)
    hand_back = threadhop._hand_back

    def slow_after_handing_back(*done) -> None:  # the caller's next job comes before this thread goes on
        hand_back(*done)
        time.sleep(0.02)

    monkeypatch.setattr(threadhop, "_hand_back", slow_after_handing_back)

    def together() -> int:
        gate.wait(5)  # four at once: four threads
        return threading.get_ident()

    async def main() -> tuple[set[int], list[int]]:
        burst = set(await asyncio.gather(*(threadhop.run_sync(together) for _ in range(4))))
        one_by_one = [await threadhop.run_sync(threading.get_ident) for _ in range(12)]
        return burst, one_by_one

    burst, one_by_one = asyncio.run(main())
    assert len(burst) == 4 and threadhop._pool._threads == 4
    assert len(set(one_by_one)) == 1 and one_by_one[0] in burst


def test_threads_idle_for_a_while_end(monkeypatch):
    monkeypatch.setattr(threadhop, "IDLE_SECONDS", 0.2)
    pool = threadhop._Pool()
    monkeypatch.setattr(threadhop, "_pool", pool)
    gate = threading.Barrier(3)

    def together() -> int:
        gate.wait(5)
        return threading.get_ident()

    async def main() -> set[int]:
        return set(await asyncio.gather(*(threadhop.run_sync(together) for _ in range(3))))

    started = asyncio.run(main())
    assert len(started) == 3 and pool._threads == 3
    deadline = time.monotonic() + 5
    while pool._threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool._threads == 0 and not pool._idle
    time.sleep(0.1)  # each has returned from its loop; now it ends
    assert not started & {t.ident for t in threading.enumerate()}

    async def again() -> str:
        return await threadhop.run_sync(lambda: "still served")

    assert asyncio.run(again()) == "still served"


def test_an_idle_thread_holds_nothing_of_its_last_jobs(monkeypatch):
    """A pool thread waiting for work keeps no reference to what its calls were given or returned (the first
    one included, which starts it)."""
    import gc
    import weakref

    monkeypatch.setattr(threadhop, "_pool", threadhop._Pool())

    class Big:
        pass

    def echo(value: Big) -> Big:
        return value

    async def main() -> list[weakref.ref]:
        refs = []
        for _ in range(2):
            given = Big()
            refs.append(weakref.ref(given))
            assert await threadhop.run_sync(echo, given) is given
            del given
        return refs

    refs = asyncio.run(main())
    deadline = time.monotonic() + 5
    while any(r() is not None for r in refs) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert all(r() is None for r in refs) and threadhop._pool._threads == 1


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


def test_a_cancelled_sync_call_is_reported_by_ping_until_its_thread_returns():
    """Python cannot stop the thread of a sync tool whose caller gave up: the worker's `ping` names it (with
    how long since the cancel) for the gateway to replace a worker that keeps one too long."""
    worker = WorkerProc(FIXTURES / "tools" / "testing")
    try:
        assert worker.request(id="p0", op="ping")["result"]["abandoned"] == []
        worker.send({"id": "c1", "op": "tools.call", "tool": "slow", "arguments": {"seconds": 1.5}})
        time.sleep(0.3)
        worker.send({"op": "cancel", "target": "c1"})
        time.sleep(0.3)
        (running,) = worker.request(id="p1", op="ping")["result"]["abandoned"]
        assert running["call"] == "slow" and 0.2 <= running["seconds"] < 1.5 and running["kind"] == "thread"
        time.sleep(1.5)  # the thread returns: its result is dropped, and it is no longer listed
        assert worker.request(id="p2", op="ping")["result"]["abandoned"] == []
    finally:
        worker.close()


def test_an_async_call_that_ignores_its_cancel_is_reported_too(tmp_path):
    folder = tmp_path / "stubborn"
    folder.mkdir()
    (folder / "t.py").write_text(
        "import asyncio\nfrom fastmcp.tools import tool\n\n\n@tool\nasync def stubborn(seconds: float) -> str:\n"
        '    """Ignore one cancel."""\n    try:\n        await asyncio.sleep(seconds)\n'
        "    except asyncio.CancelledError:\n        await asyncio.sleep(seconds)\n    return 'late'\n"
    )
    worker = WorkerProc(folder)
    try:
        worker.send({"id": "c1", "op": "tools.call", "tool": "stubborn", "arguments": {"seconds": 1.0}})
        time.sleep(0.2)
        worker.send({"op": "cancel", "target": "c1"})
        time.sleep(0.3)
        (running,) = worker.request(id="p1", op="ping")["result"]["abandoned"]
        assert running["call"] == "stubborn" and running["seconds"] >= 0.2 and running["kind"] == "task"
        time.sleep(1.2)
        worker.send({"id": "p2", "op": "ping"})
        replies = [worker.read(), worker.read()]  # it ignored the cancel: its answer comes too, and first
        assert [r["id"] for r in replies] == ["c1", "p2"] and replies[0]["result"]["content"][0]["text"] == "late"
        assert replies[1]["result"]["abandoned"] == []
    finally:
        worker.close()
