"""The gateway's side of `tooldock.worker.forkserver`: one warm interpreter per environment, and a forked
worker that looks to the process backend like the subprocess it would otherwise have spawned (`pid`,
`returncode`, `wait()`, `send_signal()`, `stdout`).

A fork server is started on first use for an interpreter (a namespace's virtualenv), in its own session,
and started again if it died; the base environment's is started before the gateway imports its own modules
(`ProcessBackend.warm_up`), so the two import at once. The worker's output comes back on a pipe the
gateway made and handed over; its exit status comes back on the request's connection, since the fork
server, not the gateway, is its parent. Nothing here is needed for correctness: when a fork server cannot
start, the backend spawns.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

READY_TIMEOUT = 60.0


class ForkServerError(RuntimeError):
    pass


class Forked:
    """A worker forked by a fork server."""

    def __init__(self, pid: int, stdout: asyncio.StreamReader, reader: asyncio.StreamReader, closer: object) -> None:
        self.pid, self.stdout = pid, stdout
        self.returncode: int | None = None
        self._exited = asyncio.Event()
        self._closer = closer
        self._watch = asyncio.create_task(self._follow(reader))

    async def _follow(self, reader: asyncio.StreamReader) -> None:
        code = None
        with contextlib.suppress(Exception):
            line = await reader.readline()
            code = json.loads(line).get("exit") if line else None
        if not isinstance(code, int):  # the fork server went away: its children exit with it (parent watch)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            code = -signal.SIGKILL
        self.returncode = code
        self._exited.set()
        with contextlib.suppress(Exception):
            self._closer.close()  # type: ignore[attr-defined]

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)


class ForkServer:
    def __init__(self, interpreter: Path, socket_path: Path, env: dict[str, str]) -> None:
        self.interpreter, self.socket_path, self.env = interpreter, socket_path, env
        self.pid: int | None = None
        # A plain Popen, not an asyncio process: `start` also runs before the gateway has an event loop.
        self._proc: subprocess.Popen[bytes] | None = None
        self._serving = False  # its socket was seen: a socket gone since means it must start again
        self._lock = asyncio.Lock()

    def start(self, unused_exit: float | None = None) -> None:
        """Start the fork server without waiting for it (its imports take a second or more): `spawn` waits.
        The gateway calls this before it imports its own modules, so that both import at once, with
        `unused_exit`: a server no namespace asked for in that time exits (started again if one does later)."""
        self.socket_path.unlink(missing_ok=True)
        self._serving = False
        argv = ["-s", "-m", "tooldock.worker.forkserver", "--socket", str(self.socket_path)]
        argv += ["--unused-exit", str(unused_exit)] if unused_exit is not None else []
        self._proc = subprocess.Popen(
            [str(self.interpreter), *argv, "--parent-pid", str(os.getpid())],
            env=self.env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = self._proc.pid

    async def _ensure(self) -> None:
        async with self._lock:
            if self._proc is None or self._proc.poll() is not None or (self._serving and not self.socket_path.exists()):
                await self._stop()
                self.start()
            proc, loop = self._proc, asyncio.get_running_loop()
            assert proc is not None
            deadline = loop.time() + READY_TIMEOUT
            while not self.socket_path.exists():
                if proc.poll() is not None or loop.time() > deadline:
                    await self._stop()
                    raise ForkServerError(f"the fork server for {self.interpreter} did not start")
                await asyncio.sleep(0.02)
            self._serving = True

    async def spawn(self, argv: list[str], env: dict[str, str], cwd: Path) -> Forked:
        """Fork a worker: `python -m tooldock.worker <argv>` with exactly `env`, in `cwd`."""
        await self._ensure()
        argv = [*argv, "--parent-pid", str(self.pid)]  # the worker's parent is this fork server
        loop = asyncio.get_running_loop()
        out_r, out_w = os.pipe()
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, str(self.socket_path))
            line = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode() + b"\n"
            sock.setblocking(True)
            sock.settimeout(10)
            socket.send_fds(sock, [line], [out_w])
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            os.close(out_r)
            raise ForkServerError(f"the fork server for {self.interpreter} refused: {exc}") from exc
        finally:
            os.close(out_w)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        try:
            answer = json.loads(await asyncio.wait_for(reader.readline(), 10) or b"{}")
        except (TimeoutError, ValueError) as exc:
            writer.close()
            os.close(out_r)
            raise ForkServerError(f"no answer from the fork server for {self.interpreter}") from exc
        if not isinstance(answer.get("pid"), int):
            writer.close()
            os.close(out_r)
            raise ForkServerError(f"the fork server for {self.interpreter} failed: {answer.get('error')}")
        stdout = asyncio.StreamReader(limit=2**20)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout), os.fdopen(out_r, "rb", 0))
        return Forked(answer["pid"], stdout, reader, writer)

    async def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.to_thread(proc.wait, 3)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.to_thread(proc.wait)

    async def close(self) -> None:
        async with self._lock:
            await self._stop()
            self.socket_path.unlink(missing_ok=True)


class ForkServers:
    """One fork server per interpreter."""

    def __init__(self, socket_dir: Path, env: dict[str, str]) -> None:
        self.socket_dir, self.env = socket_dir, env
        self._servers: dict[Path, ForkServer] = {}

    def for_interpreter(self, interpreter: Path) -> ForkServer:
        if interpreter not in self._servers:
            path = self.socket_dir / f"fork-{len(self._servers)}.sock"
            self._servers[interpreter] = ForkServer(interpreter, path, self.env)
        return self._servers[interpreter]

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self._servers.values()), return_exceptions=True)
        self._servers.clear()


def warn(message: str) -> None:
    print(f"tooldock: {message}", file=sys.stderr, flush=True)
