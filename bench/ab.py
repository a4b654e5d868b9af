"""The working tree's gateway against a commit's, side by side: is a change to the MCP path faster?

    .venv/bin/python bench/ab.py [--base HEAD] [--concurrency 1 16] [--rounds 6] [--seconds 3] [--modern]

Both gateways serve bench/tools on the process backend at the same time, one running the `tooldock`
package of the working tree (uncommitted changes included), the other that of `--base` (extracted with
`git archive` into a temporary folder; its workers run it too, as they import the gateway's package). wrk
(bench/mcp_wrk.py) drives `tools/call` on each in turn, `--rounds` short runs each, alternating which goes
first, and the ratio is the median of the rounds' ratios: this machine's speed drifts by more between runs
minutes apart than most changes are worth, and two gateways measured in turn drift together. `--modern`
sends 2026-07-28 requests instead of using a 2025-11-25 session.

Prints a table per concurrency: each side's median calls/s, every round's, the median p50 and p99, and the
CPU each side's processes (the gateway and its workers) spent per call. A difference smaller than the
spread of the rounds is not one.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
import machine  # noqa: E402
import mcp_wrk  # noqa: E402
from mcp_raw import Outcome, measure_wrk  # noqa: E402
from run import TOKEN, start_gateway  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def extract(ref: str, into: Path) -> None:
    """The `tooldock` package as commit `ref` has it, under `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", ref, "tooldock"],
                             capture_output=True)
    if archive.returncode:
        raise SystemExit(f"--base {ref!r}: git archive failed: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")


def imported_from(pythonpath: Path) -> Path:
    """Where a gateway started with this PYTHONPATH imports `tooldock` from (checked, not assumed)."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    out = subprocess.run([sys.executable, "-c", "import tooldock; print(tooldock.__file__)"], env=env, cwd="/",
                         capture_output=True, text=True, check=True)  # not from here: `tooldock serve` is not
    return Path(out.stdout.strip()).parent


async def main(base: str, levels: list[int], rounds: int, seconds: float, modern: bool) -> list[list[Outcome]]:
    with tempfile.TemporaryDirectory(prefix="tooldock-ab-") as tmp, \
            tempfile.NamedTemporaryFile("w+b") as log_a, tempfile.NamedTemporaryFile("w+b") as log_b:
        extract(base, Path(tmp))
        sides = {"working tree": REPO, f"base {base}": Path(tmp)}
        for name, root in sides.items():
            found = imported_from(root)
            if found != root / "tooldock":
                raise SystemExit(f"{name}: a gateway would import tooldock from {found}, not {root / 'tooldock'}")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        started: list[tuple[subprocess.Popen, str]] = []
        try:  # started in here, so a gateway that did start is stopped when the other does not
            for log, root in zip((log_a, log_b), sides.values(), strict=True):
                started.append(start_gateway(log, env={**os.environ, "PYTHONPATH": str(root)}))
            pairs = [(name, proc, url) for name, (proc, url) in zip(sides, started, strict=True)]
            tables = []
            for level in levels:
                got: dict[str, list[Outcome]] = {name: [] for name in sides}
                for turn in range(rounds):
                    for name, proc, url in pairs if turn % 2 == 0 else pairs[::-1]:
                        print(f"c={level} round {turn + 1}/{rounds}: {name}", file=sys.stderr, flush=True)
                        got[name].append(await measure_wrk(name, url + "/ns/bench/mcp", auth, level, seconds,
                                                           proc.pid, modern, turn == 0))
                tables.append(list(got.values()))
            return tables
        finally:
            for proc, _ in started:
                proc.terminate()
                proc.wait(20)


def show(tables: list[list[Outcome]], title: str) -> None:
    table = Table(title=title)
    for column in ("side", "concurrent", "calls/s (median)", "rounds", "p50 ms", "p99 ms", "errors",
                   "server CPU µs/call", "vs base (median of rounds)"):
        table.add_column(column, justify="left" if column in ("side", "rounds") else "right")
    for ours, theirs in tables:
        ratio = statistics.median(a.rate / b.rate for a, b in zip(ours, theirs, strict=True))
        for rounds, vs in ((ours, f"{ratio:.3f}x"), (theirs, "1.000x")):
            calls = sum(o.calls for o in rounds)
            table.add_row(rounds[0].target, str(rounds[0].concurrency), f"{statistics.median(o.rate for o in rounds):.0f}",
                          " ".join(f"{o.rate:.0f}" for o in rounds),
                          f"{statistics.median(o.pct(0.5) for o in rounds):.2f}",
                          f"{statistics.median(o.pct(0.99) for o in rounds):.2f}", str(sum(o.errors for o in rounds)),
                          f"{sum(o.server + o.workers for o in rounds) / max(calls, 1) * 1e6:.0f}", vs)
    Console(width=200).print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="HEAD", help="the commit to compare with (default: HEAD)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="wrk connections")
    parser.add_argument("--rounds", type=int, default=6, help="runs per side and concurrency, taken in turn")
    parser.add_argument("--seconds", type=float, default=3, help="length of each run")
    parser.add_argument("--modern", action="store_true", help="2026-07-28 requests instead of a session")
    args = parser.parse_args()
    if not mcp_wrk.available():
        raise SystemExit("bench/ab.py needs wrk (Debian: apt-get install wrk)")
    if args.rounds < 1 or args.seconds < 1 or min(args.concurrency) < 1:
        raise SystemExit("--rounds, --seconds and --concurrency must be 1 or more")
    tables = asyncio.run(main(args.base, args.concurrency, args.rounds, args.seconds, args.modern))
    era = "2026-07-28 requests" if args.modern else "a 2025-11-25 session"
    show(tables, f"MCP tools/call, working tree against {args.base}, wrk, {era} ({machine.describe()})")
