"""`tooldock serve`: run the gateway over a tools directory (process backend) or worker containers (docker)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tooldock.cli.common import refuse_namespace_folder, writable_state_dir
from tooldock.cli.replicas import MAX_REPLICAS, Replicas, inherited, supervise
from tooldock.cli.sharedworkers import attached, owner_requested, serve_workers
from tooldock.errors import BuilderError, SecretsError

if TYPE_CHECKING:
    from tooldock.runtime.http.drain import Drain
    from tooldock.runtime.secretmap import SecretMap
    from tooldock.runtime.settings import Settings


# `--log-level`, shared by the commands that run a server (serve, manager).
log_level_option = click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    envvar="LOG_LEVEL",
    help="Log verbosity (stderr).",
)


# TOOLS_DIR, shared by the commands that serve a tools directory (serve, manager).
tools_dir_argument = click.argument(
    "tools_dir", default="tools", envvar="TOOLDOCK_TOOLS_DIR", type=click.Path(file_okay=False, path_type=Path)
)


def listen_options(port: int, port_env: str, host_env: str | None = None) -> Callable[[Any], Any]:
    """`--host` (loopback by default) and `--port` for a command that runs a server."""

    def add(command: Any) -> Any:
        port_range = click.IntRange(0, 65535)
        command = click.option(
            "--port",
            default=port,
            show_default=True,
            type=port_range,
            envvar=port_env,
            help="Port to listen on (0: a free port, printed on stderr).",
        )(command)
        return click.option(
            "--host", default="127.0.0.1", show_default=True, envvar=host_env, help="Address to listen on."
        )(command)

    return add


@click.command()
@tools_dir_argument
@listen_options(8000, "TOOLDOCK_PORT", "TOOLDOCK_HOST")
@click.option(
    "--backend",
    type=click.Choice(["process", "docker", "network"]),
    default="process",
    show_default=True,
    envvar="TOOLDOCK_BACKEND",
    help="How workers run: 'process' = local processes in per-namespace virtualenvs (serves "
    "TOOLS_DIR); 'docker' = worker containers found through the Docker socket (see deploy); 'network' = "
    "workers on other hosts, listening with --listen, at the addresses in TOOLDOCK_WORKERS "
    "(NAMESPACE=tls://HOST:PORT, ...), reached over mutual TLS with the certificate in TOOLDOCK_TLS_DIR "
    "(see tooldock cluster).",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="docker backend: only discover and call worker containers; never start, restart or remove them.",
)
@log_level_option
@click.option(
    "--manager",
    "with_manager",
    is_flag=True,
    help="Also run the manager MCP server for TOOLS_DIR (its own process) on --manager-port, "
    "sharing the bearer token and MANAGER_INTERNAL_TOKEN (both generated when unset; the bearer token is printed).",
)
@click.option(
    "--manager-port",
    default=8001,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="--manager: the manager's port (0: a free one, printed on stderr).",
)
@click.option(
    "--watch/--no-watch",
    default=None,
    help="Reload after edits under TOOLS_DIR, one reload per burst of edits [default: ENABLE_FS_WATCHER, "
    "else off]. On the docker backend the manager watches (edits are built into images): use with --manager.",
)
@click.option(
    "--replicas",
    default=1,
    show_default=True,
    type=click.IntRange(1, MAX_REPLICAS),
    help="Run this many gateway processes on the one port, to use several cores (1: one process, no "
    "supervisor). This process binds the port once, starts the replicas on it, prefixes their stderr with "
    "their names (r1, r2, ...), restarts one that dies (backoff 1 s doubling to 30 s), passes SIGTERM and "
    "SIGINT on to all of them and SIGHUP to one (the reload reaches the others through the store), and "
    "exits when they have. They share MCP sessions, rate limits and reloads through TOOLDOCK_STATE_URL, or, "
    "when it is unset, through a private redis-server that serve starts on a unix socket in the state dir "
    "and stops on exit (Debian package redis-server; without it and without TOOLDOCK_STATE_URL serve "
    "refuses to start). Process backend: the replicas share one set of worker processes (one per namespace, so "
    "a tool's in-process state is the same through every replica), run by a worker owner process (w) that "
    "watches TOOLS_DIR (--watch) and reloads (a SIGHUP goes to it; a reload on any replica asks it); a replica "
    "that restarts leaves the workers running. Docker backend: r1 manages the containers, the others only "
    "attach to them (as --read-only).",
)
def serve(
    tools_dir: Path,
    host: str,
    port: int,
    backend: str,
    read_only: bool,
    log_level: str,
    with_manager: bool,
    manager_port: int,
    watch: bool | None,
    replicas: int,
) -> None:
    """Serve every namespace folder in TOOLS_DIR (default: ./tools).

    Each sub-folder is a namespace; each runs in its own worker process. Clients pick a namespace with
    the X-Namespace header. With --watch, edits are live once saved; otherwise send SIGHUP (or POST
    /reload) to pick up changes. With --manager, an LLM can write tools into TOOLS_DIR through the
    manager's MCP tools and make them live with reload_core.
    """
    from tooldock.runtime.settings import Settings, SettingsError

    if backend == "process" or with_manager:  # the docker backend alone serves containers, not the folder
        if not tools_dir.is_dir():
            raise click.ClickException(
                f"tools directory '{tools_dir}' does not exist; create it with one sub-folder per namespace "
                "(see examples/), or pass another directory: tooldock serve DIR"
            )
        refuse_namespace_folder(tools_dir, "serve")
    if owner_requested():  # the worker owner of `serve --replicas N` (sharedworkers.py): no port, no HTTP
        serve_workers(tools_dir, watch)
        return
    # early: a port in use is the only line, not after a token never used (a replica's was bound by its parent)
    sock, url = inherited(host) or listen(host, port)
    if with_manager and manager_port:  # the manager's too: its child would fail alone, the gateway serving on
        try:
            bind(host, manager_port).close()
        except click.ClickException as exc:
            raise click.ClickException(f"the manager {exc.message} (--manager-port)") from None
    if with_manager:
        shared_tokens()
    if replicas > 1 and not (os.environ.get("TOOLDOCK_STATE_KEY") or os.environ.get("TOOLDOCK_STATE_KEY_FILE")):
        os.environ["TOOLDOCK_STATE_KEY"] = secrets.token_urlsafe(32)  # one key for all this run's replicas
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    writable_state_dir(settings.state_dir)
    if settings.state_url is not None:
        reachable_store(settings)
    settings, manager_watches = who_watches(settings, watch, backend, with_manager)
    if replicas > 1:  # this process supervises; each replica runs this command again on the same socket
        args = [str(tools_dir), "--host", host, "--port", url.rsplit(":", 1)[1], "--backend", backend]
        manager = partial(start_manager, tools_dir, host, manager_port, url, backend, log_level, manager_watches)
        supervise(
            Replicas(replicas, sock, url, [*args, "--log-level", log_level], settings.drain_timeout),
            settings,
            backend,
            read_only,
            manager if with_manager else None,
        )
        return
    if settings.log_format == "json":
        from tooldock.runtime.logs import use_json_lines

        use_json_lines()
    if settings.token_generated:
        click.echo(
            "tooldock: TOOLDOCK_BEARER_TOKEN is not set; this run's bearer token is:\n"
            f"    {settings.bearer_token}\n"
            "Set TOOLDOCK_BEARER_TOKEN to choose your own.",
            err=True,
        )
    if backend == "docker":
        from tooldock.builder.daemon import engine

        try:
            engine()
        except BuilderError as exc:
            raise click.ClickException(str(exc)) from None
    folder, prepared = tools_dir.resolve(), None
    if backend == "process":  # its fork server imports the framework while this process imports the gateway
        from tooldock.runtime.backends.process import ProcessBackend

        prepared = attached(settings, folder) or ProcessBackend(settings, folder)  # attached: a replica's
        if isinstance(prepared, ProcessBackend):
            prepared.warm_up()
    from tooldock.runtime.app import create_app
    from tooldock.runtime.http.drain import Drain

    drain = Drain()
    try:
        app = create_app(folder, settings, host, url, backend, read_only, _secrets(), backend=prepared, drain=drain)
    except SettingsError as exc:  # the relay socket's settings, read with the rest of the app
        raise click.ClickException(str(exc)) from None
    child = (
        start_manager(tools_dir, host, manager_port, url, backend, log_level, manager_watches) if with_manager else None
    )
    try:
        run_app(app, sock, log_level, settings, drain)
    finally:
        if child is not None:
            stop_manager(child)


def reachable_store(settings: Settings) -> None:
    """A gateway that cannot reach its shared state store does not start: the URL (no password) and why."""
    from tooldock.errors import StateUnavailable
    from tooldock.state import check_reachable

    assert settings.state_url is not None
    try:
        check_reachable(settings.state_url)
    except StateUnavailable as exc:
        raise click.ClickException(
            f"TOOLDOCK_STATE_URL: {exc.message.removesuffix('; retry shortly')}. Start Redis there (or fix the "
            "URL), or unset TOOLDOCK_STATE_URL to keep the state in this process"
        ) from None
    click.echo(f"tooldock: shared state in Redis at {settings.state_url}", err=True)


def who_watches(settings: Settings, watch: bool | None, backend: str, with_manager: bool) -> tuple[Settings, bool]:
    """One watcher per tools directory: with --manager the manager's (its reload_core also rebuilds images
    on the docker backend), else the gateway's own (process backend only: a docker gateway runs images, and
    an edit means nothing to it until it is built). Returns the gateway's settings and whether the manager
    watches."""
    import dataclasses

    wanted = settings.watch if watch is None else watch
    if with_manager or not wanted:
        return dataclasses.replace(settings, watch=False), wanted and with_manager
    if backend == "docker":
        if watch:  # asked on the command line; ENABLE_FS_WATCHER set for a manager elsewhere is not an error
            raise click.ClickException(
                "--watch on the docker backend needs --manager: edits are built into images by the manager's "
                "reload_core (or run `tooldock manager --watch` beside this gateway)"
            )
        click.echo("tooldock: ENABLE_FS_WATCHER: not watching (docker backend without --manager)", err=True)
        return dataclasses.replace(settings, watch=False), False
    return dataclasses.replace(settings, watch=True), False


def shared_tokens() -> None:
    """`serve --manager`: the gateway and the manager must share the bearer token and the reload token; both
    are generated for this run when unset (the bearer token is printed, the internal one never is)."""
    import os
    import secrets

    given = ("TOOLDOCK_BEARER_TOKEN", "BEARER_TOKEN", "TOOLDOCK_BEARER_TOKEN_FILE")  # a file is read by both
    if not any(os.environ.get(name) for name in given):
        os.environ["TOOLDOCK_BEARER_TOKEN"] = secrets.token_urlsafe(32)
        click.echo(
            "tooldock: TOOLDOCK_BEARER_TOKEN is not set; this run's bearer token (gateway and manager) is:\n"
            f"    {os.environ['TOOLDOCK_BEARER_TOKEN']}\n"
            "Set TOOLDOCK_BEARER_TOKEN to choose your own.",
            err=True,
        )
    if not os.environ.get("MANAGER_INTERNAL_TOKEN_FILE"):
        os.environ.setdefault("MANAGER_INTERNAL_TOKEN", secrets.token_urlsafe(32))


def start_manager(
    tools_dir: Path, host: str, port: int, gateway_url: str, backend: str, log_level: str, watch: bool
) -> subprocess.Popen[bytes]:
    import sys

    local = gateway_url.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://[::1]:")
    args = ["manager", str(tools_dir), "--host", host, "--port", str(port), "--gateway-url", local]
    args += ["--backend", backend, "--log-level", log_level, "--watch" if watch else "--no-watch"]
    child = subprocess.Popen([sys.executable, "-m", "tooldock.cli", *args], preexec_fn=_die_with_parent)
    threading.Thread(target=_report_exit, args=(child,), name="manager-watch", daemon=True).start()
    return child


def _report_exit(child: subprocess.Popen[bytes]) -> None:
    """Say so when the manager ends while the gateway serves on (it printed its own reason above)."""
    code = child.wait()
    if code not in (0, -15):  # -15: stop_manager's SIGTERM, or the gateway going away
        click.echo(
            f"tooldock: the manager exited with code {code}; the gateway serves on without it (restart "
            "`tooldock serve --manager` to have it back)",
            err=True,
        )


def _die_with_parent() -> None:
    """In the manager child, before exec: Linux sends it SIGTERM when the gateway process goes away, however
    it goes (on SIGTERM uvicorn re-raises the signal after its shutdown, so `serve`'s own cleanup never runs)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: stop_manager() still covers a Ctrl-C
        pass


def stop_manager(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _secrets() -> SecretMap:
    """The secrets store, decrypted once before serving: a store this gateway cannot open stops start-up
    with the reason (which key file, which recipients) instead of serving namespaces without their secrets."""
    from tooldock.runtime.secretmap import SecretMap
    from tooldock.secrets import SecretStore

    secrets = SecretMap(SecretStore.from_env())
    try:
        secrets.refresh()
    except SecretsError as exc:
        raise click.ClickException(f"cannot read the secrets store: {exc}") from None
    return secrets


def run_app(app: Any, sock: socket.socket, log_level: str, settings: Settings, drain: Drain | None = None) -> None:
    """Serve `app` on the bound socket until Ctrl-C or SIGTERM, logging as `settings` say (text or JSON
    lines; uvicorn's line per request only with TOOLDOCK_ACCESS_LOG). With `drain` (the app's `Drain`), a
    SIGTERM drains first, then stops (runtime/http/drain.py)."""
    import uvicorn

    from tooldock.runtime.http.drain import DrainingServer
    from tooldock.runtime.http.wire import GatewayHttpProtocol
    from tooldock.runtime.logs import log_config, use_json_lines

    if settings.log_format == "json":
        use_json_lines()
    config = uvicorn.Config(
        app,
        log_config=log_config(log_level, settings.log_format, settings.access_log),
        log_level=log_level,
        access_log=settings.access_log,
        http=GatewayHttpProtocol,  # uvicorn's httptools protocol, one write per answer
        timeout_graceful_shutdown=int(settings.drain_timeout) + 5,  # the drain's own bound, and then some
    )
    server = (
        uvicorn.Server(config)
        if drain is None
        else DrainingServer(config, drain, settings.shutdown_grace, settings.drain_timeout)
    )
    from tooldock.runtime.http import exiting

    try:
        exiting.run(server, [sock])  # server.run, not waiting at exit for DNS lookups nobody awaits (exiting.py)
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it already handled: a clean stop, not an abort
        pass


def listen(host: str, port: int) -> tuple[socket.socket, str]:
    """The bound socket and the URL it answers on (the real port when `port` is 0)."""
    sock = bind(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    return sock, f"http://{shown_host}:{sock.getsockname()[1]}"


def bind(host: str, port: int) -> socket.socket:
    """Bind before starting, so `--port 0` works and the real address can be announced."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit this: without it, small keep-alive responses wait ~40 ms for a
        # delayed ACK (Nagle) when the socket is handed to uvicorn instead of bound by it.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    return sock
