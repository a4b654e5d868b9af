"""Worker footprint and start-up on the process backend: forked workers (the default) against spawned ones
(`TOOLDOCK_FORK_WORKERS=false`), measured in the same run.

    .venv/bin/python bench/footprint.py [--counts 1,20,50]

For each count N it makes N copies of a one-tool namespace, starts `tooldock serve` on them and reports the
time until the gateway is ready (all workers answered), each worker's PSS and private memory (from
/proc/<pid>/smaps_rollup) and the total including the fork servers; then a worker's cold start (a reload
that adds one namespace) and a scale-to-zero wake (the first call to a namespace whose worker slept).
Everything runs on 127.0.0.1; each step is bounded in time.
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
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

TOKEN = "bench-token-0123456789"
TOOL = '''from fastmcp.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b
'''


def memory(pid: int) -> tuple[float, float]:
    """(PSS, private) in MB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        fields[key] = int(value.split()[0])
    return fields["Pss"] / 1024, (fields["Private_Clean"] + fields["Private_Dirty"]) / 1024


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def make_tools(root: Path, count: int) -> Path:
    tools = root / f"tools-{count}"
    for i in range(count):
        folder = tools / f"ns{i:02d}"
        folder.mkdir(parents=True)
        (folder / "calc.py").write_text(TOOL)
    return tools


def serve(tools: Path, fork: bool, log: Path, extra_env: dict[str, str] | None = None):
    env = {**os.environ, "TOOLDOCK_BEARER_TOKEN": TOKEN, "TOOLDOCK_FORK_WORKERS": "true" if fork else "false"}
    env.update(extra_env or {})
    tooldock = str(Path(sys.executable).parent / "tooldock")
    started = time.perf_counter()
    out = open(log, "wb")
    proc = subprocess.Popen([tooldock, "serve", str(tools), "--port", "0", "--log-level", "warning"], env=env,
                            stdout=subprocess.DEVNULL, stderr=out)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = re.search(r"tooldock: ready on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
        if found:
            return proc, found.group(1), time.perf_counter() - started
        if proc.poll() is not None:
            raise SystemExit(f"gateway exited:\n{log.read_text()}")
        time.sleep(0.02)
    proc.kill()
    raise SystemExit("gateway did not start within 600 s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def worker_pids(url: str) -> list[int]:
    body = httpx.get(f"{url}/namespaces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).json()
    return [int(n["pid"]) for n in body["namespaces"] if n.get("pid")]


def footprint(root: Path, count: int, fork: bool) -> dict[str, float]:
    tools = make_tools(root / ("fork" if fork else "spawn"), count)
    proc, url, ready = serve(tools, fork, root / f"gw-{count}-{fork}.log")
    try:
        workers = worker_pids(url)
        per = [memory(p) for p in workers]
        helpers = [p for p in children(proc.pid) if p not in workers]  # fork servers
        total = sum(m[0] for m in per) + sum(memory(p)[0] for p in helpers)
        return {
            "ready": ready,
            "pss": statistics.median(m[0] for m in per),
            "private": statistics.median(m[1] for m in per),
            "total": total,
        }
    finally:
        stop(proc)


def cold_and_wake(root: Path, fork: bool) -> tuple[float, float]:
    """(cold start of one new namespace by a reload, first call after its worker slept), in ms."""
    tools = make_tools(root / f"cold-{fork}", 1)
    proc, url, _ = serve(tools, fork, root / f"cold-{fork}.log", {"MANAGER_INTERNAL_TOKEN": "bench-manager-token"})
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Manager-Token": "bench-manager-token"}
    try:
        added = tools / "fresh"
        added.mkdir()
        (added / "calc.py").write_text(TOOL)
        (added / "tooldock.yaml").write_text("idle_timeout: 1\n")
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            before = time.perf_counter()
            reply = http.post("/reload")
            cold = (time.perf_counter() - before) * 1000
            assert reply.status_code == 200, reply.text
            time.sleep(3)  # idle_timeout 1 s: the worker goes to sleep
            state = next(n for n in http.get("/namespaces").json()["namespaces"] if n["name"] == "fresh")["state"]
            before = time.perf_counter()
            answer = http.post("/tools/add", json={"a": 1, "b": 2}, headers={"X-Namespace": "fresh"})
            wake = (time.perf_counter() - before) * 1000
            assert answer.status_code == 200 and state == "sleeping", (state, answer.text)
        return cold, wake
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1,20,50")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    console = Console(stderr=True)
    table = Table(title=f"Process backend workers ({os.cpu_count()} cores)")
    for column in ("namespaces", "workers", "time to ready", "PSS / worker", "private / worker", "total PSS"):
        table.add_column(column, justify="right")
    root = Path(tempfile.mkdtemp(prefix="tooldock-footprint-"))
    try:
        for count in counts:
            for fork in (True, False):
                console.print(f"[dim]{count} namespace(s), {'forked' if fork else 'spawned'} workers ...[/dim]")
                f = footprint(root, count, fork)
                table.add_row(str(count), "forked" if fork else "spawned", f"{f['ready']:.2f} s", f"{f['pss']:.1f} MB",
                              f"{f['private']:.1f} MB", f"{f['total']:.0f} MB")
        starts = Table(title="One worker")
        for column in ("workers", "cold start (reload adding it)", "wake from scale-to-zero (first call)"):
            starts.add_column(column, justify="right")
        for fork in (True, False):
            console.print(f"[dim]cold start and wake, {'forked' if fork else 'spawned'} ...[/dim]")
            cold, wake = cold_and_wake(root, fork)
            starts.add_row("forked" if fork else "spawned", f"{cold:.0f} ms", f"{wake:.0f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out = Console()
    out.print(table)
    out.print(starts)


if __name__ == "__main__":
    main()
