"""`tooldock serve --replicas N` without TOOLDOCK_STATE_URL: a private Redis server (Debian's `redis-server`)
that the replicas share, started and stopped by `serve` itself: on a unix socket in the gateway's state dir
(mode 700: only this user reaches it), nothing written to disk, gone with the gateway."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import click

MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes, with the terminating NUL
START_TIMEOUT = 20.0

MISSING = (
    "--replicas needs a state store the replicas share: set TOOLDOCK_STATE_URL to a Redis server "
    "(e.g. redis://127.0.0.1:6379/0), or install `redis-server` (Debian/Ubuntu: apt-get install redis-server) "
    "and `tooldock serve --replicas` starts a private one of its own"
)


class PrivateRedis:
    """One `redis-server` process for one `serve --replicas` run: `start()` returns its URL (unix://...),
    `stop()` ends it and removes its socket and folder. Linux ends it with SIGTERM if `serve` dies first."""

    def __init__(self, state_dir: Path) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise click.ClickException(MISSING)
        folder = state_dir / "replicas" / f"redis-{os.getpid()}"
        if len(os.fsencode(folder / "redis.sock")) > MAX_SOCKET_PATH:  # a deep state dir: a short private one
            folder = Path(tempfile.mkdtemp(prefix="tooldock-redis-"))
        self.folder, self.sock = folder, folder / "redis.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.sock}"

    def start(self) -> str:
        from tooldock.cli.serve import _die_with_parent

        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.folder, 0o700)
        self.sock.unlink(missing_ok=True)
        assert self.binary is not None
        args = [
            self.binary,
            "--port",
            "0",
            "--unixsocket",
            str(self.sock),
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.folder),
            "--logfile",
            str(self.folder / "redis.log"),
            "--daemonize",
            "no",
        ]
        click.echo("tooldock: no TOOLDOCK_STATE_URL: starting a private redis-server for the replicas", err=True)
        # Called from the main thread, which lives as long as `serve`: PR_SET_PDEATHSIG follows the thread.
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
            process_group=0,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                why = self._log() or f"exit code {self.proc.poll()}"
                self.stop()
                raise click.ClickException(f"the private redis-server did not start: {why}")
            time.sleep(0.05)
        click.echo(
            f"tooldock: private redis-server (pid {self.proc.pid}) at {self.url}; stopped with the gateway", err=True
        )
        return self.url

    def _answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as conn:
                conn.settimeout(1)
                conn.connect(str(self.sock))
                conn.sendall(b"PING\r\n")
                return conn.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def _log(self) -> str:
        log = self.folder / "redis.log"
        return log.read_text(errors="replace").strip()[-1500:] if log.exists() else ""

    def stop(self) -> None:
        """SIGTERM (redis-server exits at once: nothing to save), SIGKILL after 10 s; then its files go."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
