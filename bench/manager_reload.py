"""Edit one tool file, make it live: the manager's `reload_core` on both backends, against doing it by hand.

    .venv/bin/python bench/manager_reload.py [--runs 3]

Each run changes one tool file of the `bench` namespace (bench/tools/bench plus `extra.py`, whose `version`
tool returns the run number) and measures from the edit until the new version answers:
1. process backend: `tooldock serve --manager`, the manager's `reload_core` over MCP (official SDK client),
   until the gateway's REST answer is the new number (the worker restarts in a warm virtualenv).
2. docker backend: `tooldock serve --backend docker --manager`, `reload_core` (daemonless rebuild with a
   warm layer cache, load, deploy a new generation, hot swap) until the gateway answers with the new number.
3. by hand: `docker build` of a Dockerfile `FROM` the namespace's image (built by ToolDock: nothing is
   pulled) that `COPY`s the edited file, then `docker run` (--network none, the socket directory mounted)
   until the worker's socket answers its ready handshake listing the tools. No gateway and no swap: the
   bare minimum a person does by hand, so it flatters the by-hand path.
The table shows the median and the range of the runs. Traffic: loopback and unix sockets only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build import ensure_docker  # noqa: E402
from run import TOKEN, start_gateway  # noqa: E402

HERE = Path(__file__).resolve().parent
EXTRA = 'from fastmcp.tools import tool\n\n\n@tool\ndef version() -> int:\n    """Which edit."""\n    return {n}\n'


def manager_url(log: Path) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"tooldock manager: ready on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise SystemExit(f"the manager did not start:\n{log.read_text(errors='replace')[-2000:]}")


def reload_core(url: str) -> dict:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> dict:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=600) as http:
            async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("reload_core", {})
                    if result.is_error:  # raised out here, not inside the SDK's task groups
                        return {"error": " ".join(getattr(c, "text", "") for c in result.content)}
                    return dict(result.structured_content or {})

    answer = asyncio.run(main())
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer


def stop_gateway(proc: subprocess.Popen) -> None:
    """SIGINT, as Ctrl-C: `tooldock serve --manager` stops its manager child then (on SIGTERM the child is left
    running: uvicorn re-raises SIGTERM with the default handler after its shutdown, before serve's cleanup)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for_version(gateway: str, n: int, timeout: float = 300) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "bench"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = httpx.post(f"{gateway}/tools/version", json={}, headers=headers, timeout=30)
        if reply.status_code == 200 and reply.json() == {"result": n}:
            return
        time.sleep(0.02)
    raise SystemExit(f"version {n} was not served within {timeout}s")


def through_manager(tmp: Path, env: dict[str, str], args: list[str], runs: int, label: str) -> list[float]:
    tools = tmp / f"tools-{label}"
    shutil.copytree(HERE / "tools" / "bench", tools / "bench")
    (tools / "bench" / "extra.py").write_text(EXTRA.format(n=0))
    log_path = tmp / f"{label}.log"
    with open(log_path, "w+b") as log:
        proc, gateway = start_gateway(log, [*args, "--manager", "--manager-port", "0"], env, tools)
        try:
            url = manager_url(log_path)

            def reload() -> None:
                try:
                    result = reload_core(url)
                except RuntimeError as exc:
                    raise SystemExit(f"{label}: reload_core failed: {exc}\n"
                                     f"{log_path.read_text(errors='replace')[-3000:]}") from None
                if result.get("failed"):
                    raise SystemExit(f"{label}: reload_core reported failures: {result['failed']}")

            reload()  # version 0 deployed / started: the warm starting point
            wait_for_version(gateway, 0)
            times = []
            for n in range(1, runs + 1):
                started = time.perf_counter()
                (tools / "bench" / "extra.py").write_text(EXTRA.format(n=n))
                reload()
                wait_for_version(gateway, n)
                times.append(time.perf_counter() - started)
            return times
        finally:
            stop_gateway(proc)


def handshake(sock: Path) -> dict | None:
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(5)
            client.connect(str(sock))
            with client.makefile("rb") as stream:
                return json.loads(stream.readline())
    except (OSError, ValueError):
        return None


def by_hand(tmp: Path, env: dict[str, str], runs: int) -> list[float]:
    """docker build FROM the namespace image + docker run, until the worker's socket answers."""
    context = tmp / "by-hand"
    context.mkdir()
    base = json.loads(subprocess.run(["docker", "image", "inspect", "tooldock/bench:latest"], env=env,
                                     capture_output=True, text=True, check=True).stdout)[0]["Id"]
    (context / "Dockerfile").write_text(f"FROM {base}\nCOPY extra.py /app/extra.py\n")
    build_env = {**env, "DOCKER_BUILDKIT": "0"}
    times = []
    for n in range(1, runs + 1):
        sockets = Path(tempfile.mkdtemp(prefix="tdh-"))
        os.chmod(sockets, 0o777)
        name = f"tooldock-bench-by-hand-{n}"
        try:
            started = time.perf_counter()
            (context / "extra.py").write_text(EXTRA.format(n=100 + n))
            subprocess.run(["docker", "build", "-q", "-t", "tooldock-bench-by-hand", str(context)], env=build_env,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run(["docker", "run", "-d", "--name", name, "--network", "none", "--user", "65532:65532",
                            "-v", f"{sockets}:/run/tooldock", "tooldock-bench-by-hand"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + 120
            while (ready := handshake(sockets / "bench.sock")) is None or "version" not in json.dumps(ready):
                if time.monotonic() > deadline:
                    raise SystemExit("the hand-built container never answered")
                time.sleep(0.02)
            times.append(time.perf_counter() - started)
        finally:
            subprocess.run(["docker", "rm", "-f", name], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
            shutil.rmtree(sockets, ignore_errors=True)
    return times


def main(runs: int) -> None:
    host, dockerd = ensure_docker()
    tmp = Path(tempfile.mkdtemp(prefix="tdr-"))
    env = {**os.environ, "DOCKER_HOST": host, "TOOLDOCK_SOCKET_DIR": str(tmp / "s"), "TOOLDOCK_BEARER_TOKEN": TOKEN,
           "MANAGER_INTERNAL_TOKEN": "bench-manager-token-0123", "TOOLDOCK_DRAIN_TIMEOUT": "5"}
    console = Console(stderr=True)
    rows = []
    tooldock = str(Path(sys.executable).parent / "tooldock")
    # containers an interrupted earlier run left in this engine: the docker run starts from none
    subprocess.run([tooldock, "stop", "bench"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    try:
        console.print("process backend ...")
        rows.append(("reload_core, process backend", through_manager(tmp, env, [], runs, "process")))
        console.print("docker backend ...")
        rows.append(("reload_core, docker backend", through_manager(tmp, env, ["--backend", "docker"], runs, "docker")))
        console.print("by hand ...")
        rows.append(("docker build + docker run, by hand", by_hand(tmp, env, runs)))
    finally:
        subprocess.run([tooldock, "stop", "bench"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        if dockerd is not None:
            dockerd.terminate()
            dockerd.wait(60)
    table = Table(title=f"one tool file edited -> new version answering ({runs} runs)")
    for column in ("path", "median s", "min s", "max s"):
        table.add_column(column)
    for label, times in rows:
        table.add_row(label, f"{statistics.median(times):.2f}", f"{min(times):.2f}", f"{max(times):.2f}")
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    main(parser.parse_args().runs)
