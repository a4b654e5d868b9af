"""Workers on loopback TCP with mutual TLS, as the network tests start them: `python -m tooldock.worker
--listen 127.0.0.1:PORT --tls-dir DIR` on a fixture namespace (and a unix socket beside it when asked)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import FIXTURES

TESTING = FIXTURES / "tools" / "testing"


class NetWorker:
    """One worker process; `wait=False` returns at once (call `ready()`), so that several start together.
    `host`: any of 127.0.0.0/8, so that several workers share a port as a DNS name's addresses do."""

    def __init__(
        self,
        tls_dir: Path,
        log: Path,
        port: int = 0,
        socket_path: Path | None = None,
        folder: Path = TESTING,
        wait: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        self.log = log
        args = [
            sys.executable,
            "-m",
            "tooldock.worker",
            "--namespace",
            "testing",
            "--dir",
            str(folder),
            "--listen",
            f"{host}:{port}",
            "--tls-dir",
            str(tls_dir),
        ]
        if socket_path is not None:
            args += ["--socket", str(socket_path)]
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(args, stderr=self._out, stdout=self._out)
        self.address = self.host = self.port = ""
        if wait:
            self.ready()

    def ready(self) -> NetWorker:
        deadline = time.monotonic() + 60
        while not (found := re.search(r"worker ready on .*?(tls://[\d.]+:\d+)", self.logs)):
            assert self.proc.poll() is None, self.logs
            assert time.monotonic() < deadline, f"the worker did not start:\n{self.logs}"
            time.sleep(0.05)
        self.address = found.group(1)
        self.host, self.port = self.address.removeprefix("tls://").rsplit(":", 1)
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def refusals(self) -> list[str]:
        return [line for line in self.logs.splitlines() if "refused a connection" in line]

    def wait_for_refusal(self, count: int) -> list[str]:
        deadline = time.monotonic() + 15
        while len(self.refusals()) < count:
            assert time.monotonic() < deadline, f"no refusal logged:\n{self.logs}"
            time.sleep(0.05)
        return self.refusals()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)
        self._out.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cluster_ca(folder: Path) -> Path:
    """A cluster CA in `folder` with a worker's and a gateway's certificate (under `folder/certs/`)."""
    from tooldock import cluster

    cluster.init(folder)
    for name in ("worker", "gateway"):
        cluster.issue(folder, name)
    return folder
