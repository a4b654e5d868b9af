"""MCP `tools/call` through the gateway against FastMCP serving the same tool file directly, with a raw-HTTP
load generator (not the SDK's client): one MCP session per target (2025-11-25), N connections sending on it
at once, each keeping one request in flight (asyncio connections; at 1 concurrent one blocking socket, the
lightest this load generator can be while its time is in every call's); then the same with 2026-07-28
requests (no session: every request carries its envelope); responses read as JSON or as an SSE stream,
chunked or not.

    .venv/bin/python bench/mcp_raw.py [--calls 3000] [--concurrency 1 16] [--seconds 30]
                                      [--guest-halt-poll-ns NS]

Every target is measured in the same run on 127.0.0.1, bounded by a call count and a time limit. The table
shows the load generator's own CPU per call, so it can be seen not to be the bottleneck, and the server's:
the CPU the target's processes (the gateway and its workers, or the peer) spent per call, read from /proc,
with the workers' share of it.

Then the lean path and the peer again, driven by wrk (bench/mcp_wrk.py; rows marked "wrk:"): at 1 concurrent
a call's time includes the load generator's, and wrk's is a tenth of the Python client's.

The table's title names the machine's idle settings (bench/machine.py): at 1 concurrent every call wakes
three sleeping processes, and on a VM what that costs depends on whether an idle CPU polls before it halts.
`--guest-halt-poll-ns` sets that for the run (root, on a guest using the haltpoll cpuidle driver) and puts
the old value back after it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
import machine  # noqa: E402
import mcp_wrk  # noqa: E402
from mcp_http import (  # noqa: E402
    ENVELOPE,
    BlockingConnection,
    Connection,
    answer_of,
    call_headers,
    header_lines,
    split_url,
)
from run import TOKEN, start_gateway, start_peer, tree_cpu  # noqa: E402

TOOL = "echo_number"


@dataclass
class Outcome:
    target: str
    concurrency: int
    calls: int
    errors: int
    wall: float
    cpu: float  # the load generator's CPU seconds
    latencies: list[float]
    server: float = 0.0  # CPU seconds of the server's process (the gateway, or the peer)
    workers: float = 0.0  # CPU seconds of the gateway's workers (and fork servers)
    quantiles: dict[float, float] | None = None  # p50 and p99 in ms, when the load generator gives only those
    ratio: float | None = None  # its rate against the peer's, when worked out from rounds taken in turn

    @property
    def rate(self) -> float:
        return self.calls / self.wall if self.wall else 0.0

    def pct(self, q: float) -> float:
        if self.quantiles is not None:
            return self.quantiles[q]
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


class Calls:
    """The calls of one measurement: each one's request and the check of its answer, the count of calls left
    (bounded by a number and a time limit), the latencies of the good ones and the number of the others."""

    def __init__(self, tool: str, modern: bool, extra: str, calls: int, seconds: float) -> None:
        self.tool, self.modern, self.extra = tool, modern, extra
        self.remaining, self.deadline, self.ids = calls, time.monotonic() + seconds, iter(range(2, 10**9))
        self.latencies: list[float] = []
        self.errors = 0

    def request(self, x: int) -> tuple[int, bytes]:
        rid = next(self.ids)
        params: dict = {"name": self.tool, "arguments": {"x": x}}
        if self.tool != TOOL:  # the Context tool reports progress: ask for it, and check it arrived
            params["_meta"] = {"progressToken": rid}
        if self.modern:
            params["_meta"] = {**params.get("_meta", {}), **ENVELOPE}
        return rid, json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()

    def answered(self, rid: int, x: int, status: int, headers: dict[str, str], data: bytes) -> bool:
        answer = answer_of(headers, data)
        result = answer.get("result", {}).get("structuredContent")
        ok = status == 200 and answer.get("id") == rid and result == {"result": x}
        return ok and (self.tool == TOOL or b"notifications/progress" in data)

    def next(self) -> bool:
        """Whether to make another measured call (and count it as made)."""
        self.remaining -= 1
        return self.remaining >= 0 and time.monotonic() < self.deadline

    def count(self, ok: bool, started: float) -> None:
        if ok:
            self.latencies.append(time.perf_counter() - started)
        else:
            self.errors += 1


async def measure(
    target: str, url: str, headers: dict[str, str], calls: int, concurrency: int, seconds: float, tool: str = TOOL,
    capabilities: dict | None = None, pid: int | None = None, modern: bool = False,
) -> Outcome:
    """`modern`: 2026-07-28 requests (no session: each POST carries the `_meta` envelope and the routing
    headers); else one 2025-11-25 session shared by the connections. At 1 concurrent the calls go over a
    blocking socket in a thread of their own (`BlockingConnection`), else over asyncio connections."""
    todo = Calls(tool, modern, header_lines(await call_headers(url, headers, tool, modern, capabilities)), calls,
                 seconds)
    if concurrency == 1:
        return await asyncio.to_thread(_measure_blocking, target, BlockingConnection(*split_url(url), headers), todo,
                                       pid)
    conns = [Connection(*split_url(url), headers) for _ in range(concurrency)]
    for conn in conns:
        await conn.open()

    async def call(conn: Connection, x: int) -> bool:
        rid, body = todo.request(x)
        return todo.answered(rid, x, *await conn.post(body, todo.extra))

    async def loop(conn: Connection, x: int) -> None:
        for _ in range(20):  # warm-up, not measured
            await call(conn, x)
        await barrier.wait()
        while todo.next():
            started = time.perf_counter()
            todo.count(await call(conn, x), started)

    barrier = asyncio.Barrier(concurrency + 1)
    tasks = [asyncio.create_task(loop(c, i)) for i, c in enumerate(conns)]
    await barrier.wait()
    with _Taken(target, concurrency, todo, pid) as taken:
        await asyncio.gather(*tasks)
    for conn in conns:
        conn.close()
    return taken.outcome


def _measure_blocking(target: str, conn: BlockingConnection, todo: Calls, pid: int | None) -> Outcome:
    conn.open()

    def call() -> bool:
        rid, body = todo.request(0)
        return todo.answered(rid, 0, *conn.post(body, todo.extra))

    for _ in range(20):  # warm-up, not measured
        call()
    with _Taken(target, 1, todo, pid) as taken:
        while todo.next():
            started = time.perf_counter()
            todo.count(call(), started)
    conn.close()
    return taken.outcome


class _Taken:
    """The wall time, the load generator's CPU and the server's taken by the calls made in its block."""

    def __init__(self, target: str, concurrency: int, todo: Calls, pid: int | None) -> None:
        self.target, self.concurrency, self.todo, self.pid = target, concurrency, todo, pid

    def __enter__(self) -> _Taken:
        self.server = tree_cpu(self.pid) if self.pid else (0.0, 0.0)
        self.cpu, self.started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall, cpu = time.perf_counter() - self.started, resource.getrusage(resource.RUSAGE_SELF)
        server = tree_cpu(self.pid) if self.pid else (0.0, 0.0)
        used = (cpu.ru_utime + cpu.ru_stime) - (self.cpu.ru_utime + self.cpu.ru_stime)
        self.outcome = Outcome(self.target, self.concurrency, len(self.todo.latencies), self.todo.errors, wall, used,
                               self.todo.latencies, server[0] - self.server[0], server[1] - self.server[1])


async def measure_wrk(target: str, url: str, headers: dict[str, str], concurrency: int, seconds: float,
                     pid: int, modern: bool = False, warm: bool = True) -> Outcome:
    """The same calls driven by wrk (bench/mcp_wrk.py), bounded by `seconds`."""
    every = {**headers, **await call_headers(url, headers, TOOL, modern)}
    meta = ENVELOPE if modern else None
    if warm:  # a warm-up run, before the server's CPU is read (it would count its calls' CPU, not its calls)
        await asyncio.to_thread(mcp_wrk.run, url, every, concurrency, 1, TOOL, meta)
    server0 = tree_cpu(pid)
    got = await asyncio.to_thread(mcp_wrk.run, url, every, concurrency, seconds, TOOL, meta)
    server1 = tree_cpu(pid)
    return Outcome(target, concurrency, got["calls"], got["errors"], got["wall"], got["cpu"], [],
                   server1[0] - server0[0], server1[1] - server0[1], {0.5: got["p50"], 0.99: got["p99"]})


ROUNDS = 5  # rounds per target, the targets taking turns


async def wrk_rows(gw_url: str, gateway: int, peer_url: str, peer: int, levels: list[int],
                   seconds: float) -> list[tuple[Outcome, ...]]:
    """The lean path against the peer with wrk as the load generator, on a session and with 2026-07-28: the
    two take turns for ROUNDS short runs each (this machine's speed drifts by more than the gap between
    runs minutes apart), and "vs peer" is the median of the rounds' ratios."""
    if not mcp_wrk.available():
        print("wrk is not installed (Debian: apt-get install wrk): the wrk rows are left out", file=sys.stderr)
        return []
    auth, rows = {"Authorization": f"Bearer {TOKEN}"}, []
    for modern in (False, True):
        era = " 2026-07-28" if modern else ""
        for level in levels:
            ours: list[Outcome] = []
            theirs: list[Outcome] = []
            for turn in range(ROUNDS):
                pair = [
                    (ours, f"wrk: ToolDock MCP{era} (lean path)", gw_url + "/ns/bench/mcp", auth, gateway),
                    (theirs, f"wrk: FastMCP direct{era}, JSON answers (peer)", peer_url + "/mcp", {}, peer),
                ]
                for into, target, url, headers, pid in pair if turn % 2 == 0 else pair[::-1]:
                    into.append(await measure_wrk(target, url, headers, level, seconds / ROUNDS, pid, modern, turn == 0))
            ratio = statistics.median(a.rate / b.rate for a, b in zip(ours, theirs, strict=True))
            rows.append((_merged(ours, ratio), _merged(theirs, 1.0)))
    return rows


def _merged(rounds: list[Outcome], ratio: float) -> Outcome:
    """One row for a target's rounds: their calls and times summed, their latencies together (wrk's: the
    median round's quantiles)."""
    middle = sorted(rounds, key=lambda o: o.rate)[len(rounds) // 2]
    return Outcome(middle.target, middle.concurrency, sum(o.calls for o in rounds), sum(o.errors for o in rounds),
                   sum(o.wall for o in rounds), sum(o.cpu for o in rounds), [t for o in rounds for t in o.latencies],
                   sum(o.server for o in rounds), sum(o.workers for o in rounds), middle.quantiles, ratio)


async def in_turn(targets: list[tuple[str, str, dict[str, str], int, dict]], calls: int, level: int,
                  seconds: float) -> tuple[Outcome, ...]:
    """The targets (name, url, headers, pid, `measure`'s other arguments; the peer last) measured by the
    Python client in turn, ROUNDS rounds of `seconds / ROUNDS` each, the order reversed every other round;
    each one's "vs peer" is the median of the rounds' ratios, as for the wrk rows."""
    rounds: list[list[Outcome]] = [[] for _ in targets]
    for turn in range(ROUNDS):
        order = list(enumerate(targets))
        for index, (name, url, headers, pid, more) in order if turn % 2 == 0 else order[::-1]:
            rounds[index].append(await measure(name, url, headers, -(-calls // ROUNDS), level, seconds / ROUNDS,
                                               pid=pid, **more))
    peer = rounds[-1]
    return tuple(_merged(mine, statistics.median(m.rate / p.rate for m, p in zip(mine, peer, strict=True)))
                 for mine in rounds)


async def main(calls: int, levels: list[int], seconds: float) -> list[tuple[Outcome, ...]]:
    rows: list[tuple[Outcome, ...]] = []
    with tempfile.NamedTemporaryFile("w+b", suffix=".log") as log, tempfile.NamedTemporaryFile("w+b") as log2:
        gateway, gw_url = start_gateway(log)
        sdk_only, sdk_url = start_gateway(log2, env={**os.environ, "TOOLDOCK_LEAN_MCP": "false"})
        peer, peer_url = start_peer("--json")  # FastMCP's fastest setting: JSON answers, no SSE stream
        streaming, streaming_url = start_peer()  # SSE answers: what a Context tool's progress needs
        try:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            ours = gw_url + "/ns/bench/mcp", auth, gateway.pid
            sdk = sdk_url + "/ns/bench/mcp", auth, sdk_only.pid
            theirs = peer_url + "/mcp", {}, peer.pid
            modern = {"modern": True}  # 2026-07-28: no session, the envelope in every request
            # a Context tool with progress (a client that declares sampling): streamed by the lean path, or by
            # the SDK; the worker's warm sessions either way
            progress = {"tool": "echo_progress", "capabilities": {"sampling": {}}}
            groups = [
                [("ToolDock MCP (lean path)", *ours, {}), ("ToolDock MCP (SDK path)", *sdk, {}),
                 ("FastMCP direct, JSON answers (peer)", *theirs, {})],
                [("ToolDock MCP 2026-07-28 (lean path)", *ours, modern),
                 ("ToolDock MCP 2026-07-28 (SDK path)", *sdk, modern),
                 ("FastMCP direct 2026-07-28, JSON answers (peer)", *theirs, modern)],
                [("ToolDock MCP (lean path), Context tool + progress", *ours, progress),
                 ("ToolDock MCP (SDK path), Context tool + progress", *sdk, progress),
                 ("FastMCP direct, Context tool + progress (peer)", streaming_url + "/mcp", {}, streaming.pid,
                  progress)],
            ]
            for group in groups:
                for level in levels:
                    rows.append(await in_turn(group, calls, level, seconds))
            rows += await wrk_rows(gw_url, gateway.pid, peer_url, peer.pid, levels, min(seconds, 10))
        finally:
            for proc in (gateway, sdk_only, peer, streaming):
                proc.terminate()
                proc.wait(20)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000, help="measured calls per target and concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="connections on the session")
    parser.add_argument("--seconds", type=float, default=30, help="time limit per target")
    parser.add_argument("--guest-halt-poll-ns", type=int, default=None, metavar="NS",
                        help="how long an idle CPU polls before halting, for this run (root, VM guests; "
                             "see bench/machine.py)")
    args = parser.parse_args()
    with machine.halt_polling(args.guest_halt_poll_ns):
        settings = machine.describe()
        rows = asyncio.run(main(args.calls, args.concurrency, args.seconds))
    table = Table(title=f"MCP tools/call {TOOL}, raw HTTP/1.1 keep-alive, loopback ({settings})")
    columns = ("target", "concurrent", "calls/s", "p50 ms", "p99 ms", "errors", "vs peer", "server CPU µs/call",
               "workers' share", "loadgen CPU µs/call")
    for column in columns:
        table.add_column(column, justify="left" if column == "target" else "right")
    for row in rows:
        peer = row[-1]
        for r in row:
            table.add_row(r.target, str(r.concurrency), f"{r.rate:.0f}", f"{r.pct(0.5):.2f}", f"{r.pct(0.99):.2f}",
                          str(r.errors), f"{r.ratio if r.ratio is not None else r.rate / peer.rate:.2f}x",
                          f"{(r.server + r.workers) / max(r.calls, 1) * 1e6:.0f}",
                          f"{r.workers / max(r.calls, 1) * 1e6:.0f}" if r.workers else "-",
                          f"{r.cpu / max(r.calls, 1) * 1e6:.0f}")
    Console(width=200).print(table)
