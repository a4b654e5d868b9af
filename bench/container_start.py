"""Docker backend: a worker container's start to ready (its socket answers the ready handshake), with the
framework's bytecode the image carries against the same image told to ignore it (`PYTHONPYCACHEPREFIX`
pointing at the container's tmpfs, so every start compiles the framework again, as images did before they
carried bytecode). Both in the same run, on the bench namespace, with the backend's hardening (read-only,
no network, no capabilities, non-root).

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

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build import ensure_docker  # noqa: E402

HERE = Path(__file__).resolve().parent
TOOLDOCK = str(Path(sys.executable).parent / "tooldock")


def start_once(docker: list[str], image: str, sockets: Path, extra_env: dict[str, str]) -> float:
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
                            return time.perf_counter() - started
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
            times = [start_once(docker, image, tmp / "s", extra) for _ in range(runs)]
            rows.append((label, statistics.median(times), min(times), max(times)))
        table = Table(title=f"worker container start -> ready handshake, {runs} runs each ({os.cpu_count()} CPUs)")
        for column in ("image", "median s", "min s", "max s"):
            table.add_column(column, justify="left" if column == "image" else "right")
        for label, median, low, high in rows:
            table.add_row(label, f"{median:.2f}", f"{low:.2f}", f"{high:.2f}")
        Console(width=120).print(table)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if dockerd is not None:
            dockerd.terminate()
            dockerd.wait(30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    main(parser.parse_args().runs)
