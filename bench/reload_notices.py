"""What telling a reload to the shared 2025-era sessions costs (issue 56, runtime/mcp/sharedreloads.py): for
N sessions with a GET stream, the time the replica that tells them takes (read the group, each session's
subscriptions, one pipelined write of three notices a session), once with every session's state held by
that replica and once with it read from Redis (sessions it does not hold), and what the other replicas pay
(one swap that finds the change told). The same Redis commands a gateway sends, on Debian's redis-server
on 127.0.0.1; the median of `--rounds`.

    .venv/bin/python bench/reload_notices.py [--sessions 1 100 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replicas import Redis

from tooldock.runtime.mcp.sessionsharing import SessionSharing
from tooldock.runtime.mcp.sharedreloads import ReloadNotices
from tooldock.state import open_store


async def none(sid: str) -> list[str]:  # a session held here: its state is in memory
    return []


async def measure(url: str, sessions: list[int], rounds: int) -> list[tuple[int, float, float, float]]:
    store = open_store(url, namespace="bench")
    told, sharing, rows = ReloadNotices(store, 3600.0, 100), SessionSharing(store, "ns", "me", 3600.0), []
    try:
        for count in sessions:
            await store.client.flushdb()
            for n in range(count):
                await told.opened("ns", f"session-{n}")
            held, read, other = [], [], []
            for r in range(rounds):
                for times, subscriptions, lists in ((held, none, f"a{r}"), (read, sharing.subscriptions, f"b{r}")):
                    started = time.perf_counter()
                    assert await told.changed("ns", lists, subscriptions) == count
                    times.append(time.perf_counter() - started)
                started = time.perf_counter()
                assert await told.changed("ns", f"b{r}", none) == 0  # another replica with the same lists
                other.append(time.perf_counter() - started)
            rows.append((count, *(statistics.median(t) * 1000 for t in (held, read, other))))
    finally:
        await store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    redis = Redis(Path(tempfile.mkdtemp(prefix="bench-reload-notices-")))
    try:
        rows = asyncio.run(measure(redis.url, args.sessions, args.rounds))
    finally:
        redis.stop()
    table = Table(title="A reload told to the sessions with a GET stream (ms, median)")
    for column in ("sessions", "teller, state held", "teller, state read", "each other replica"):
        table.add_column(column, justify="right")
    for count, held, read, other in rows:
        table.add_row(f"{count:,}", f"{held:.1f}", f"{read:.1f}", f"{other:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
