"""The `process` backend: each namespace runs as a local worker process in its own virtualenv.

A `ProcessWorker` makes sure the namespace's environment exists and runs `python -m tooldock.worker`;
`supervisor.SupervisedWorker` does the rest (ready handshake, restarts with backoff, crash loops, drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import shutil
import signal
import tempfile
from pathlib import Path

import tooldock
from tooldock.namespace.models import INLINE_REFS_ENV, NamespaceSource, ScanResult
from tooldock.namespace.scanner import scan_tools_dir
from tooldock.runtime.backends.environments import Environments
from tooldock.runtime.backends.forking import Forked, ForkServerError, ForkServers, warn
from tooldock.runtime.backends.supervisor import SupervisedWorker
from tooldock.runtime.settings import Settings
from tooldock.runtime.workerclient import SecretEnv
from tooldock.worker.family import Family

# Only these variables of the gateway's environment reach a worker: never the gateway's tokens.
# INLINE_REFS_ENV: a worker inlines its tools' `$ref`s for the gateway only when the gateway lists them so.
PASSTHROUGH_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", INLINE_REFS_ENV)
# An early fork server (warm_up) that no worker was forked from this long after it started exits: every
# namespace had requirements of its own, so the base environment's would only hold memory.
EARLY_UNUSED_EXIT = 120.0
GROUP_GRACE_POLLS = 20  # 50 ms apart: a second for a tool's child processes to end after a SIGTERM


def worker_env(source: NamespaceSource, lib: Path, secrets: dict[str, str]) -> dict[str, str]:
    """A worker's environment: a few of the gateway's variables (never its tokens), the namespace's `env`,
    the secret values it declares, and PYTHONPATH holding only ToolDock (`worker_lib`)."""
    env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env.update(dict(source.config.env))
    env.update(secrets)  # only the names the namespace declares (secretmap), over its defaults
    if source.config.secrets:  # names only: the worker masks their values in what it prints
        env["TOOLDOCK_SECRET_NAMES"] = ",".join(source.config.secrets)
    env.update(PYTHONPATH=str(lib), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def worker_lib(state_dir: Path) -> Path:
    """A directory holding only a link to the `tooldock` package, for the worker's PYTHONPATH.

    Pointing PYTHONPATH at the gateway's site-packages would put the gateway's dependencies in front of
    the namespace's own; this exposes nothing but ToolDock itself.
    """
    package = Path(tooldock.__file__).resolve().parent
    lib = state_dir / "lib" / hashlib.sha256(str(package).encode()).hexdigest()[:12]
    link = lib / "tooldock"
    if not link.exists():
        lib.mkdir(parents=True, exist_ok=True)
        tmp = lib / f".tooldock-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)
    return lib


class ProcessWorker(SupervisedWorker):
    """One namespace as a local process: `python -m tooldock.worker` in the namespace's virtualenv."""

    replaceable = True  # a stuck one is replaced by a fresh process while it finishes what it can

    def __init__(self, backend: ProcessBackend, source: NamespaceSource, generation: int, secrets: SecretEnv) -> None:
        super().__init__(
            source.name,
            backend.settings,
            backend.socket_dir / f"{source.name}.{generation}.sock",
            source.config.idle_timeout,
            secrets,
        )
        self.backend, self.source = backend, source
        self._interpreter: Path | None = None
        self._proc: asyncio.subprocess.Process | Forked | None = None
        self._ended_code: int | None = None  # the last process's, once `_terminate` let go of it
        self._family = Family()  # its tools' children, taken before it is asked to exit by itself
        self._output_task: asyncio.Task[None] | None = None

    async def _prepare(self) -> None:
        cfg = self.source.config
        self._interpreter, self.deps_synced = await self.backend.envs.ensure(
            self.namespace, self.source.path / "requirements.txt", self.source.requirements, cfg.python
        )

    async def _launch(self) -> None:
        env = worker_env(self.source, self.backend.lib, self.secrets.values)
        args = ["--namespace", self.namespace, "--dir", str(self.source.path), "--socket", str(self.socket_path)]
        for tool_file in self.source.files:
            args += ["--file", tool_file.filename]
        self.socket_path.unlink(missing_ok=True)
        assert self._interpreter is not None
        if self.backend.forks is not None:
            try:
                self._proc = await self.backend.forks.for_interpreter(self._interpreter).spawn(
                    args, env, self.source.path
                )
            except ForkServerError as exc:  # never fatal: spawn the worker instead
                warn(f"{exc}; starting {self.namespace!r} as a new process")
        if self._proc is None:
            self._proc = await asyncio.create_subprocess_exec(
                str(self._interpreter),
                "-s",
                "-m",
                "tooldock.worker",
                *args,
                "--parent-pid",
                str(os.getpid()),
                cwd=str(self.source.path),
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C on the gateway's terminal must not hit workers directly
            )
        self.pid = self._proc.pid
        self._output_task = asyncio.create_task(self._forward_output(self._proc))

    async def _forward_output(self, proc: asyncio.subprocess.Process | Forked) -> None:
        assert proc.stdout is not None
        await self._output.follow(proc.stdout)

    def _exit_code(self) -> int | None:
        return self._proc.returncode if self._proc is not None else self._ended_code

    async def _wait_exited(self) -> None:
        if self._proc is not None:
            await self._proc.wait()

    async def _ask_to_exit(self, wait: float) -> None:
        if self._proc is not None and self._proc.returncode is None:  # its tools' children, while it holds them
            self._family = Family.of(self._proc.pid)
        await super()._ask_to_exit(wait)

    async def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        family, self._family = self._family, Family()
        if proc is None:
            return
        try:
            await _end(proc, family)
        finally:
            # A worker that died can close its socket before it is reaped: its code is known only now.
            self._ended_code = proc.returncode


async def _end(proc: asyncio.subprocess.Process | Forked, known: Family | None = None) -> None:
    """Stop the worker and whatever its tools started: a worker leads its own process group (it starts a new
    session), and its tools' child processes are in it, or, if they left it (`setsid`), still below the
    worker (family.py), taken before the worker is signalled. They get the worker's SIGTERM, and those still
    there once the worker is gone are ended too, also when the worker ended by itself (scale to zero): no
    tool's child outlives its worker. `known`: its family taken before it was asked to exit by itself."""
    family = Family.of(proc.pid) if proc.returncode is None else Family()
    family.members.update((known or Family()).members)
    try:
        if proc.returncode is None:
            for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(sig)  # the worker itself: a forked one may not have made its group yet
                _signal_group(proc.pid, sig)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await proc.wait()
                        break
        # What its tools left running: asked to stop first.
        if not (_signal_group(proc.pid, signal.SIGTERM) | family.signal(signal.SIGTERM)):
            return
        for _ in range(GROUP_GRACE_POLLS):
            await asyncio.sleep(0.05)
            if not (_signal_group(proc.pid, 0) or family.alive()):
                return
    finally:  # then made to; also when this wait is cancelled (the gateway stopping)
        _signal_group(proc.pid, signal.SIGKILL)
        family.signal(signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` (0: none, only look) to the process group; whether it still has a process."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


class ProcessBackend:
    name = "process"

    def __init__(self, settings: Settings, tools_dir: Path) -> None:
        self.settings, self.tools_dir = settings, tools_dir
        self.envs = Environments(settings.state_dir / "envs")
        self.lib = worker_lib(settings.state_dir)
        # Socket paths are limited to ~107 bytes: keep them in a short private directory.
        self.socket_dir = Path(tempfile.mkdtemp(prefix="tooldock-"))
        self._generations = itertools.count(1)
        base = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        base.update(PYTHONPATH=str(self.lib), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
        self.forks = ForkServers(self.socket_dir, base) if settings.fork_workers else None

    def warm_up(self) -> None:
        """Start the fork server of the base environment (namespaces without requirements) now, when that
        environment is built already: `tooldock serve` calls this before it imports the gateway, so the fork
        server's imports (a second or more) run beside the gateway's own instead of after them."""
        if self.forks is None:
            return
        interpreter = self.envs.ready()
        if interpreter is not None:
            self.forks.for_interpreter(interpreter).start(unused_exit=EARLY_UNUSED_EXIT)

    async def discover(self) -> ScanResult:
        return await asyncio.to_thread(scan_tools_dir, self.tools_dir)

    def create(self, source: NamespaceSource, secrets: SecretEnv) -> ProcessWorker:
        return ProcessWorker(self, source, next(self._generations), secrets)

    async def close(self) -> None:
        if self.forks is not None:
            await self.forks.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)
