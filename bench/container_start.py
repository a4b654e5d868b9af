"""Docker backend: a worker container's start to ready (its socket answers the ready handshake), with the
framework's bytecode the image carries against the same image told to ignore it (`PYTHONPYCACHEPREFIX`
pointing at the container's tmpfs, so every start compiles the framework again, as images did before they
carried bytecode). Both in the same run, on the bench namespace, with the backend's hardening (read-only,
no network, no capabilities, non-root). Also the first call of the namespace's Context tool (`echo_progress`,
which needs the worker's bridge, imported in the background once the worker serves), sent at the ready
handshake and, in other starts, a second after it.

    .venv/bin/python bench/container_start.py [--runs 5]

Needs a Docker engine (DOCKER_HOST, the default socket, or a local dockerd it starts). No network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build import ensure_docker  # noqa: E402

HERE = Path(__file__).resolve().parent
TOOLDOCK = str(Path(sys.executable).parent / "tooldock")


CONTEXT_CALL = {"id": "first", "op": "tools.call", "tool": "echo_progress", "arguments": {"x": 1}}


def first_call(client: socket.socket, stream: Any, after: float) -> float:
    """Seconds from sending the Context tool's first call (`after` seconds past ready) to its answer."""
    time.sleep(after)
    sent = time.perf_counter()
    client.sendall(json.dumps(CONTEXT_CALL).encode() + b"\n")
    while True:
        line = json.loads(stream.readline() or b"{}")
        if not line:
            raise SystemExit("the worker closed the connection before answering the Context call")
        if line.get("id") == "first" and "ok" in line:
            if not line["ok"]:
                raise SystemExit(f"the Context call failed: {line}")
            return time.perf_counter() - sent


def start_once(
    docker: list[str], image: str, sockets: Path, extra_env: dict[str, str], call_after: float | None = None
) -> tuple[float, float | None]:
    """Seconds from `docker run` to the ready handshake; with `call_after`, also the Context tool's first call."""
    shutil.rmtree(sockets, ignore_errors=True)
    sockets.mkdir(parents=True)
    os.chmod(sockets, 0o777)
    env_args = [a for k, v in extra_env.items() for a in ("-e", f"{k}={v}")]
    started = time.perf_counter()
    cid = subprocess.run(
        [*docker, "run", "-d", "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,noexec,size=64m", "--cap-drop", "ALL",
         "--security-opt", "no-new-privileges:true", "--user", "65532:65532", "--network", "none",
         "-v", f"{sockets}:/run/tooldock", *env_args, image],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    try:
        sock = sockets / "bench.sock"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as client:
                    client.settimeout(30)
                    client.connect(str(sock))
                    with client.makefile("rb") as stream:
                        if json.loads(stream.readline()).get("op") == "ready":
                            ready = time.perf_counter() - started
                            return ready, None if call_after is None else first_call(client, stream, call_after)
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.005)
        raise SystemExit("the worker container did not become ready within 60 s")
    finally:
        subprocess.run([*docker, "rm", "-f", cid], capture_output=True)


def main(runs: int) -> None:
    host, dockerd = ensure_docker()
    docker = ["docker", "-H", host]
    tmp = Path(tempfile.mkdtemp(prefix="tdstart-"))
    env = {**os.environ, "DOCKER_HOST": host}
    try:
        src = tmp / "src" / "bench"
        shutil.copytree(HERE / "tools" / "bench", src)
        print("building and loading the bench image ...", file=sys.stderr)
        subprocess.run([TOOLDOCK, "build", str(src), "--output", str(tmp / "oci"), "--load"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        image = "tooldock/bench:latest"
        rows = []
        for label, extra in (("bytecode from the image", {}),
                             ("compiled at start (PYTHONPYCACHEPREFIX=/tmp/pyc)", {"PYTHONPYCACHEPREFIX": "/tmp/pyc"})):
            start_once(docker, image, tmp / "s", extra)  # warm the engine's caches, not measured
            at_ready = [start_once(docker, image, tmp / "s", extra, 0.0) for _ in range(runs)]
            later = [start_once(docker, image, tmp / "s", extra, 1.0) for _ in range(runs)]
            times = [ready for ready, _ in at_ready + later]
            calls = [statistics.median(call or 0.0 for _, call in measured) * 1000 for measured in (at_ready, later)]
            rows.append((label, statistics.median(times), min(times), max(times), *calls))
        table = Table(title=f"worker container start -> ready handshake, {2 * runs} runs each ({os.cpu_count()} CPUs)")
        columns = ("image", "median s", "min s", "max s", "first Context call at ready ms", "... 1 s after ready ms")
        for column in columns:
            table.add_column(column, justify="left" if column == "image" else "right")
        for label, median, low, high, at_once, after in rows:
            table.add_row(label, f"{median:.2f}", f"{low:.2f}", f"{high:.2f}", f"{at_once:.0f}", f"{after:.0f}")
        Console(width=140).print(table)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if dockerd is not None:
            dockerd.terminate()
            dockerd.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    main(parser.parse_args().runs)
