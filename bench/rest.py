"""REST through the gateway against a bare Starlette endpoint on the same stack, measured with wrk (Debian's
`wrk`, one thread, 16 connections) in the same run:

    .venv/bin/python bench/rest.py [--seconds 10] [--rounds 5] [--connections 16]

The targets take turns, `--rounds` rounds of `--seconds / --rounds` each, and each ratio is the median of
the rounds' ratios: this machine's speed drifts by more between runs a minute apart than the gap measured.

Both answer `POST /tools/echo_number {"x": 7}` with `{"result": 7}`; the gateway's goes through auth, the
request edge, the engine, the audit log and a worker. Loopback only; each run is bounded by --seconds.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import TOKEN, start_gateway  # noqa: E402

LUA = """wrk.method = "POST"
wrk.body = '{"x": 7}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
wrk.headers["X-Namespace"] = "bench"
"""


def wrk(url: str, seconds: int, connections: int, script: Path) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
                         capture_output=True, text=True, timeout=seconds + 30).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p50.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rate": rate, "p50": float(p50.group(1)) * scale, "errors": int(errors.group(1)) if errors else 0}


# The peer again, on the gateway's HTTP protocol: shows how much of the gain is the protocol alone.
COALESCED = "bare Starlette, gateway's HTTP protocol"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=10, help="per target, all rounds together")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per target, the targets taking turns")
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench/rest.py needs wrk (Debian: apt-get install wrk)")
    tmp = Path(tempfile.mkdtemp(prefix="tooldock-rest-"))
    script = tmp / "post.lua"
    script.write_text(LUA % TOKEN)
    console = Console(stderr=True)
    procs = []
    try:
        with open(tmp / "gateway.log", "w") as log:
            gateway, url = start_gateway(log, env={**os.environ, "TOOLDOCK_LOG_DIR": str(tmp / "audit")})
        procs.append(gateway)
        targets = [("ToolDock REST POST /tools/{name}", url)]
        for name, extra in (("bare Starlette + uvicorn (peer)", []), (COALESCED, ["--coalesce"])):
            peer = subprocess.Popen(
                [sys.executable, str(HERE / "peer_starlette.py"), *extra], stdout=subprocess.PIPE, text=True
            )
            procs.append(peer)
            targets.append((name, f"http://127.0.0.1:{peer.stdout.readline().strip()}"))
        rounds = max(1, args.rounds)
        each = max(1, round(args.seconds / rounds))
        for name, base in targets:
            console.print(f"[dim]{name}: warm-up ...[/dim]")
            wrk(f"{base}/tools/echo_number", 2, args.connections, script)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in targets}
        for number in range(rounds):
            console.print(f"[dim]round {number + 1} of {rounds}: {each} s per target ...[/dim]")
            for name, base in targets:
                runs[name].append(wrk(f"{base}/tools/echo_number", each, args.connections, script))
    finally:
        for proc in procs:
            proc.terminate()
        shutil.rmtree(tmp, ignore_errors=True)
    title = f"REST, wrk -t1 -c{args.connections}, {rounds} rounds of {each} s taken in turn ({os.cpu_count()} cores)"
    table = Table(title=title)
    for column in ("target", "req/s", "p50 ms", "non-2xx"):
        table.add_column(column, justify="right")
    for name, got in runs.items():
        rate = statistics.mean(r["rate"] for r in got)
        p50 = statistics.median(r["p50"] for r in got)
        table.add_row(name, f"{rate:.0f}", f"{p50:.2f}", str(sum(int(r["errors"]) for r in got)))
    ours, peer, coalescing = (runs[name] for name, _ in targets)

    def ratio(other: list[dict[str, float]]) -> str:
        each_round = sorted(a["rate"] / b["rate"] for a, b in zip(ours, other, strict=True))
        spread = f" ({each_round[0]:.2f}-{each_round[-1]:.2f})" if len(each_round) > 1 else ""
        return f"{statistics.median(each_round):.2f}x{spread}"

    table.add_row("ratio to the peer (median of rounds)", ratio(peer), "", "")
    table.add_row("ratio to the coalescing peer", ratio(coalescing), "", "")
    Console().print(table)


if __name__ == "__main__":
    main()
