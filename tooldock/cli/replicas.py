"""`tooldock serve --replicas N`: N gateway processes on one port, supervised by the `serve` process.

The model is pre-fork: the parent binds the port once and every replica inherits the listening socket
(passed by file descriptor to a fresh `tooldock serve` child, which serves on it instead of binding). The
kernel hands each new connection to whichever replica accepts first. Chosen over SO_REUSEPORT because:
the port is bound once, so `--port 0` names one port and nothing else can join the group; the parent keeps
the socket open, so connections that arrive while a replica restarts (or before any is ready) wait in the
one backlog instead of being refused, and those queued behind a replica that dies are accepted by another
(a SO_REUSEPORT socket's own queue is reset with it).

The parent runs nothing of the gateway: it starts the store the replicas share when none is given (a private
`redis-server`, privateredis.py), prefixes each replica's stderr with its name, restarts a replica that dies
(with backoff), forwards SIGTERM / SIGINT to all of them and SIGHUP to one (a reload on one replica reaches
the others through the store; a SIGHUP to each would reload every replica N times), and exits once all of
them have. On the process backend it also starts the worker owner (`w`, sharedworkers.py), which runs the
workers of every replica: supervised like a replica, told of a SIGHUP instead of one, stopped after them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from tooldock.cli.privateredis import PrivateRedis
from tooldock.cli.sharedworkers import (
    OWNER_NAME,
    make_shared_dir,
    remove_shared_dir,
    shared_by_default,
)
from tooldock.runtime.backends.shared import OWNER_ENV, SHARED_ENV

if TYPE_CHECKING:
    from tooldock.runtime.settings import Settings

FD_ENV, NAME_ENV = "_TOOLDOCK_LISTEN_FD", "_TOOLDOCK_REPLICA"  # parent -> replica only; never documented
MAX_REPLICAS = 64
READY = "tooldock: ready on "
BACKOFF_FIRST, BACKOFF_MAX, STEADY_AFTER = 1.0, 30.0, 60.0  # seconds
START_TIMEOUT = 600.0  # the first start builds every namespace's virtualenv


def supervise(
    supervisor: Replicas,
    settings: Settings,
    backend: str,
    read_only: bool,
    manager: Callable[[], subprocess.Popen[bytes]] | None,
) -> None:
    """`serve --replicas N`: start the shared store (unless given) and the manager (once, for all: `manager`
    starts it), then supervise the replicas until asked to stop. Only r1 watches TOOLS_DIR and serves the
    relay socket (on each, a reload or a relay would do the same work N times); on the docker backend only r1
    starts and removes containers, the others attach to them as --read-only gateways do."""
    from tooldock.cli.serve import stop_manager

    # A replica told to stop may first serve on for TOOLDOCK_SHUTDOWN_GRACE (the drain on SIGTERM), then drain.
    supervisor.drain_timeout += float(getattr(settings, "shutdown_grace", 0.0))
    supervisor.share_store(settings.state_url is not None, settings.state_dir)
    supervisor.share_secrets(settings.bearer_token, settings.token_generated)
    supervisor.first_args = ["--watch" if settings.watch else "--no-watch"] + (["--read-only"] if read_only else [])
    if backend == "process" and shared_by_default():  # one set of workers; the owner watches TOOLS_DIR
        supervisor.share_workers(supervisor.first_args[:1])
        supervisor.first_args = ["--no-watch"]
    supervisor.other_args = ["--no-watch"] + (["--read-only"] if read_only or backend == "docker" else [])
    supervisor.others = {"TOOLDOCK_RELAY_SOCKET": "off"}
    child = manager() if manager is not None else None
    try:
        supervisor.run()
    finally:
        if child is not None:
            stop_manager(child)


def inherited(host: str) -> tuple[socket.socket, str] | None:
    """In a replica: the listening socket its parent passed on, and the URL it answers on (None when this
    process is not a replica). The variables are dropped at once, so workers and tools never see them."""
    fd = os.environ.pop(FD_ENV, None)
    os.environ.pop(NAME_ENV, None)
    if fd is None:
        return None
    sock = socket.socket(fileno=int(fd))
    shown_host = f"[{host}]" if ":" in host else host
    return sock, f"http://{shown_host}:{sock.getsockname()[1]}"


@dataclass
class Replica:
    name: str
    label: str = ""  # how the parent's lines name it ("replica r1", "worker owner w")
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ready: threading.Event = field(default_factory=threading.Event)
    failures: int = 0  # deaths in a row, each soon after its start: the backoff grows with them
    restart_at: float | None = None  # when a replica that died starts again


class Replicas:
    """The parent of `serve --replicas N`: `run()` returns when every replica has exited after a SIGTERM or
    SIGINT; it raises ClickException when one fails before it was ever ready (a start-up error, said by it)."""

    def __init__(self, count: int, sock: socket.socket, url: str, argv: list[str], drain_timeout: float) -> None:
        self.sock, self.url, self.argv, self.drain_timeout = sock, url, argv, drain_timeout
        self.replicas = [Replica(f"r{n + 1}", f"replica r{n + 1}") for n in range(count)]
        self.owner: Replica | None = None  # the worker owner, when the replicas share process workers
        self.shared: Path | None = None  # its directory (sharedworkers.py)
        self.owner_args: list[str] = []
        self.env: dict[str, str] = dict(os.environ)
        self.first_args: list[str] = []  # options only the first replica gets (--watch)
        self.other_args: list[str] = []  # and only the others (--no-watch, --read-only)
        self.others: dict[str, str] = {}  # environment only the others get
        self.stopping: int | None = None  # the signal that asked the replicas to stop
        self.pending: list[int] = []  # signals received, handled by the main loop (never in the handler)
        self.redis: PrivateRedis | None = None
        self._out = threading.Lock()

    # -- set-up ----------------------------------------------------------------------------------------------

    def share_store(self, state_url_given: bool, state_dir: Path) -> None:
        """TOOLDOCK_STATE_URL given: every replica uses it (checked by the caller). Else a private redis-server
        (or a ClickException saying what to install or set)."""
        if state_url_given:
            return
        self.redis = PrivateRedis(state_dir)
        self.env["TOOLDOCK_STATE_URL"] = self.redis.start()
        self.env.pop("TOOLDOCK_STATE_URL_FILE", None)

    def share_secrets(self, bearer_token: str, token_generated: bool) -> None:
        """What each replica would otherwise generate for itself must be one value for all: the bearer token
        (printed once, here). The state key is one already: `serve` puts a generated one in the environment
        before it reads the settings, which refuse a state store without one."""
        if token_generated:
            self.env["TOOLDOCK_BEARER_TOKEN"] = bearer_token
            click.echo(
                "tooldock: TOOLDOCK_BEARER_TOKEN is not set; this run's bearer token (every replica) is:\n"
                f"    {bearer_token}\n"
                "Set TOOLDOCK_BEARER_TOKEN to choose your own.",
                err=True,
            )

    def share_workers(self, args: list[str]) -> None:
        """Process backend: a worker owner runs the workers and every replica attaches to them."""
        self.shared = make_shared_dir()
        self.env[SHARED_ENV] = str(self.shared)
        self.owner, self.owner_args = Replica(OWNER_NAME, f"worker owner {OWNER_NAME}"), args

    def _members(self) -> list[Replica]:
        return ([self.owner] if self.owner is not None else []) + self.replicas

    # -- running ---------------------------------------------------------------------------------------------

    def run(self) -> None:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
        try:
            click.echo(f"tooldock: starting {len(self.replicas)} gateway replicas on {self.url}", err=True)
            for replica in self._members():
                self._start(replica)
            self._until_ready()
            if self.stopping is None:
                click.echo(
                    f"{READY}{self.url} (MCP at {self.url}/mcp, REST at {self.url}/tools; "
                    f"{len(self.replicas)} replicas: {self._pids()})",
                    err=True,
                )
                self._supervise()
        finally:
            self._stop_all()
            if self.redis is not None:
                self.redis.stop()
            if self.shared is not None:
                remove_shared_dir(self.shared)
            self.sock.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: object) -> None:
        """Only noted here (a handler that wrote to stderr could interrupt a write there)."""
        self.pending.append(signum)
        if signum != signal.SIGHUP and self.stopping is None:
            self.stopping = signum

    def _handle_signals(self) -> None:
        while self.pending:
            signum = self.pending.pop(0)
            if signum == signal.SIGHUP:
                self._reload()
                continue
            self._say(f"tooldock: {signal.Signals(signum).name}: stopping the replicas")
            # The worker owner after them (_stop_all): they may still call it. A second Ctrl-C is passed on too:
            # uvicorn then stops at once.
            for replica in self.replicas:
                if replica.proc is not None and replica.proc.poll() is None:
                    replica.proc.send_signal(signum)

    def _start(self, replica: Replica) -> None:
        from tooldock.cli.serve import _die_with_parent

        first = replica is self.replicas[0]
        env = {**self.env, FD_ENV: str(self.sock.fileno()), NAME_ENV: replica.name, **({} if first else self.others)}
        argv = self.argv + (self.first_args if first else self.other_args)
        if replica is self.owner:  # no port: it serves the replicas' workers (the relay socket is r1's)
            env = {**self.env, OWNER_ENV: "1", "TOOLDOCK_RELAY_SOCKET": "off"}
            argv = self.argv + self.owner_args
        replica.ready.clear()
        # From the main thread only: PR_SET_PDEATHSIG fires when the thread that started the child ends. Its
        # own process group: a Ctrl-C in the terminal reaches the parent alone, which passes it on once.
        replica.proc = subprocess.Popen(
            [sys.executable, "-m", "tooldock.cli", "serve", *argv],
            env=env,
            pass_fds=(self.sock.fileno(),),
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
            process_group=0,
        )
        replica.started, replica.restart_at = time.monotonic(), None
        self._say(f"tooldock: {replica.label} started (pid {replica.proc.pid})")
        assert replica.proc.stderr is not None
        threading.Thread(
            target=self._relay,
            args=(replica, replica.proc.stderr, replica.proc.pid),
            name=f"replica-{replica.name}-stderr",
            daemon=True,
        ).start()

    def _relay(self, replica: Replica, stream: IO[bytes], pid: int) -> None:
        """A replica's stderr, line by line, each marked with its name: a JSON log line gets a "replica"
        field, any other line a `[rN]` prefix. Its "ready on" line becomes the parent's to say."""
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith(READY):
                replica.ready.set()
                line = f"tooldock: {replica.label} ready (pid {pid})"
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if isinstance(record, dict):
                    self._say(json.dumps({**record, "replica": replica.name}))
                    continue
            self._say(f"[{replica.name}] {line}")
        stream.close()

    def _say(self, line: str) -> None:
        with self._out:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def _pids(self) -> str:
        return ", ".join(f"{r.name} pid {r.proc.pid}" for r in self._members() if r.proc is not None)

    def _until_ready(self) -> None:
        """Every replica ready, or a ClickException naming the one that failed first (its reason is above)."""
        deadline = time.monotonic() + START_TIMEOUT
        while self.stopping is None and not all(r.ready.is_set() for r in self._members()):
            self._handle_signals()  # a SIGHUP before every replica is ready
            for replica in self._members():
                assert replica.proc is not None
                code = replica.proc.poll()
                if code is not None and not replica.ready.is_set():
                    time.sleep(0.2)  # the rest of what it said, before the parent's last word
                    raise click.ClickException(
                        f"{replica.label} exited with code {code} while starting (its output is above); "
                        "stopping the others"
                    )
            if time.monotonic() > deadline:
                raise click.ClickException(f"the replicas were not ready within {START_TIMEOUT:.0f} s")
            time.sleep(0.1)

    def _supervise(self) -> None:
        """Until a SIGTERM or SIGINT: restart a replica that died (after 1 s, doubling up to 30 s while it
        keeps dying within a minute of its start), and pass a SIGHUP to one live replica."""
        while self.stopping is None:
            now = time.monotonic()
            self._handle_signals()
            for replica in self._members():
                assert replica.proc is not None
                if replica.restart_at is not None:
                    if now >= replica.restart_at and self.stopping is None:
                        self._start(replica)
                    continue
                code = replica.proc.poll()
                if code is None:
                    continue
                replica.failures = 1 if now - replica.started >= STEADY_AFTER else replica.failures + 1
                delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (replica.failures - 1))
                replica.restart_at = now + delay
                self._say(
                    f"tooldock: {replica.label} (pid {replica.proc.pid}) exited unexpectedly "
                    f"({_exit_reason(code)}); restarting it in {delay:.0f} s"
                )
            time.sleep(0.1)

    def _reload(self) -> None:
        owner = self.owner
        if owner is not None and owner.proc is not None and owner.proc.poll() is None and owner.ready.is_set():
            owner.proc.send_signal(signal.SIGHUP)  # it reloads the workers; every replica follows its manifest
            self._say(f"tooldock: SIGHUP: the {owner.label} reloads, and every replica follows")
            return
        live = [r for r in self.replicas if r.proc is not None and r.proc.poll() is None and r.ready.is_set()]
        if not live:
            self._say("tooldock: SIGHUP: no replica is ready to reload; ignored")
            return
        assert live[0].proc is not None
        live[0].proc.send_signal(signal.SIGHUP)
        self._say(f"tooldock: SIGHUP: replica {live[0].name} reloads, and the others with it (through the store)")

    def _stop_all(self) -> None:
        """Pass the stopping signal on (SIGTERM when start-up failed), wait for the replicas to finish what
        they serve (a second Ctrl-C is passed on too), then SIGKILL what is left."""
        live = [r.proc for r in self.replicas if r.proc is not None and r.proc.poll() is None]
        if self.stopping is None:
            self.stopping = signal.SIGTERM
            self.pending.append(signal.SIGTERM)
        deadline = time.monotonic() + self.drain_timeout + 15
        while any(proc.poll() is None for proc in live) and time.monotonic() < deadline:
            self._handle_signals()
            time.sleep(0.05)
        for proc in live:
            if proc.poll() is None:
                self._say(f"tooldock: replica pid {proc.pid} did not stop in time; killing it")
                proc.kill()
                proc.wait()
        if live:
            self._say("tooldock: every replica has stopped")
        owner = self.owner.proc if self.owner is not None else None
        if owner is not None and owner.poll() is None:  # last: the replicas' calls in flight needed its workers
            owner.terminate()
            try:
                owner.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._say(f"tooldock: the worker owner (pid {owner.pid}) did not stop in time; killing it")
                owner.kill()
                owner.wait()


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
