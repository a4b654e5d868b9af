"""A real load balancer for tests: Debian's haproxy on a loopback port, round robin over gateway replicas with
no stickiness unless asked, its per-server request counts read from its stats socket."""

from __future__ import annotations

import csv
import io
import socket
import subprocess
import time
from pathlib import Path

from conftest import require
from rediskit import free_port


class Haproxy:
    def __init__(self, folder: Path, backends: list[str], sticky: bool = False, redispatch: bool = False,
                 checks: bool = False) -> None:
        """`redispatch`: a request whose server refuses the connection (a replica stopping or starting) goes
        to another; each request gets a server connection of its own, so none is sent on a connection the
        server is closing. `checks`: a server is taken out while its `GET /health` does not answer 200
        (looked at every 200 ms; out after two misses, back after one answer), as a Kubernetes readiness
        probe or Swarm's health check does; a request sent to a server that refuses it fails (no retry)."""
        require("haproxy")
        folder.mkdir(parents=True, exist_ok=True)
        self.port, self.stats = free_port(), folder / "haproxy.sock"
        check = " check inter 200ms fall 2 rise 1" if checks else ""
        servers = "".join(f"  server r{n} {url.removeprefix('http://')}{check}\n" for n, url in enumerate(backends))
        if checks:  # and no retry of a refused connection: the checks alone keep requests from a stopped server
            servers = "  option httpchk GET /health\n  retries 0\n" + servers
        again = ("  option http-server-close\n  option redispatch\n  retries 3\n  retry-on conn-failure\n"
                 if redispatch else "")
        stick = ("  stick-table type string len 128 size 100k expire 1h\n  stick on req.hdr(mcp-session-id)\n"
                 "  stick store-response res.hdr(mcp-session-id)\n") if sticky else ""
        (folder / "haproxy.cfg").write_text(
            f"global\n  maxconn 1024\n  stats socket {self.stats} mode 600 level admin\n"
            "defaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  timeout server 120s\n"
            f"frontend gateway\n  bind 127.0.0.1:{self.port}\n  default_backend replicas\n"
            f"backend replicas\n  balance roundrobin\n{again}{stick}{servers}"
        )
        self.proc = subprocess.Popen(["haproxy", "-f", str(folder / "haproxy.cfg"), "-db"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "haproxy did not start"
                time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def _command(self, line: str) -> str:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(self.stats))
            conn.sendall(line.encode() + b"\n")
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
        return data.decode()

    def _stats(self, field: str) -> dict[str, int]:
        rows = csv.DictReader(io.StringIO(self._command("show stat").lstrip("# ")))
        return {r["svname"]: int(r[field] or 0) for r in rows
                if r["pxname"] == "replicas" and r["svname"].startswith("r")}

    def requests_per_server(self) -> dict[str, int]:
        """Requests haproxy has sent each server so far (its `show stat` counters, `stot`)."""
        return self._stats("stot")

    def drain(self, server: str) -> None:
        """Send `server` (r0, r1, ...) no new request, as an operator does before restarting it, and wait
        until it has none in flight."""
        self._command(f"set server replicas/{server} state drain")
        deadline = time.monotonic() + 30
        while self._stats("scur")[server]:
            assert time.monotonic() < deadline, f"{server} still has requests in flight"
            time.sleep(0.02)

    def ready(self, server: str) -> None:
        self._command(f"set server replicas/{server} state ready")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
