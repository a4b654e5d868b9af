"""A real Redis server for tests (Debian's `redis-server`, started and stopped here; never a fake): on a unix
socket in a temp folder, or a free loopback port, no persistence. `restart()` brings it back at the same
address, so a gateway configured with its URL can be shown to recover."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from conftest import require


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    def __init__(self, folder: Path, tcp: bool = False, password: str | None = None) -> None:
        require("redis-server")
        self.folder, self.password = folder, password
        folder.mkdir(parents=True, exist_ok=True)
        self.sock = folder / "redis.sock"
        self.port = free_port() if tcp else 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port:
            auth = f":{self.password}@" if self.password else ""
            return f"redis://{auth}127.0.0.1:{self.port}/0"
        return f"unix://{self.sock}"

    def start(self) -> RedisServer:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")]
        if not self.port:
            args += ["--unixsocket", str(self.sock), "--unixsocketperm", "700"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not self._answers():
            assert self.proc.poll() is None, f"redis-server exited: {self._log()}"
            assert time.monotonic() < deadline, f"redis-server did not start: {self._log()}"
            time.sleep(0.05)
        return self

    def _answers(self) -> bool:
        try:
            if self.port:
                conn = socket.create_connection(("127.0.0.1", self.port), timeout=1)
            else:
                conn = socket.socket(socket.AF_UNIX)
                conn.settimeout(1)
                conn.connect(str(self.sock))
            with conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def _log(self) -> str:
        log = self.folder / "redis.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else ""

    def stop(self) -> None:
        """SIGKILL: a Redis lost, not one that said goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if not self.port:
            self.sock.unlink(missing_ok=True)

    def restart(self) -> None:
        self.stop()
        self.start()

    def flush(self) -> None:
        subprocess.run(["redis-cli", *self._where(), "FLUSHALL"], check=True, capture_output=True, timeout=10)

    def _where(self) -> list[str]:
        where = ["-p", str(self.port)] if self.port else ["-s", str(self.sock)]
        return where + (["-a", self.password, "--no-auth-warning"] if self.password else [])

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
