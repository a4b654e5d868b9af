"""Issue 16's figures in one command: MCP against FastMCP (bench/mcp_raw.py), REST against a bare endpoint
(bench/rest.py), worker footprint and start-up for 1, 20 and 50 namespaces (bench/footprint.py) and a worker
container's start (bench/container_start.py), each with its peer in the same run, one after another (never
two at once: they would share the two cores), each table printed as its script prints it.

    .venv/bin/python bench/speed.py [--quick] [--skip docker]

`--quick` runs each with fewer calls, seconds and namespaces (a check that they all run, not figures to
quote); `--skip` leaves parts out (mcp, rest, footprint, docker). The docker part needs the `dockerd` of
Debian's docker.io, as the test set-up uses; without it, that part says so and the others still run. Exits
non-zero when a part failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
PARTS = {  # name: (script, its arguments, --quick's arguments)
    "mcp": ("mcp_raw.py", ["--calls", "3000", "--seconds", "20"], ["--calls", "300", "--seconds", "3"]),
    "rest": ("rest.py", ["--seconds", "10"], ["--seconds", "2", "--rounds", "2"]),
    "footprint": ("footprint.py", ["--counts", "1,20,50"], ["--counts", "1,3"]),
    "docker": ("container_start.py", ["--runs", "5"], ["--runs", "1"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer calls and namespaces: checks that all run")
    parser.add_argument("--skip", nargs="*", default=[], choices=sorted(PARTS), help="parts to leave out")
    args = parser.parse_args()
    failed = []
    for name, (script, full, quick) in PARTS.items():
        if name in args.skip:
            continue
        print(f"\n== {name}: bench/{script} {' '.join(quick if args.quick else full)}", file=sys.stderr, flush=True)
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(HERE / script), *(quick if args.quick else full)])
        print(
            f"== {name}: exit {done.returncode} after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True
        )
        if done.returncode:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
