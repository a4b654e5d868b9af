"""The `tooldock` command line. Results go to stdout, logs and progress to stderr."""

from __future__ import annotations

import copy
import socket
import sys
from pathlib import Path

import click

import tooldock

from .errors import BuilderError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tooldock.__version__, prog_name="tooldock")
def main() -> None:
    """ToolDock: serve folders of Python @tool functions over MCP and REST."""


def _uvicorn_log_config(level: str) -> dict:
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"  # stdout is for results only
    config["loggers"]["uvicorn.access"]["level"] = level.upper()
    return config


@main.command()
@click.argument("tools_dir", default="tools", envvar="TOOLDOCK_TOOLS_DIR",
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, envvar="TOOLDOCK_HOST",
              help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), envvar="TOOLDOCK_PORT",
              help="Port to listen on.")
@click.option("--backend", type=click.Choice(["process", "docker"]), default="process", show_default=True,
              envvar="TOOLDOCK_BACKEND",
              help="How workers run: 'process' = local processes in per-namespace virtualenvs (serves "
                   "TOOLS_DIR); 'docker' = worker containers found through the Docker socket (see deploy).")
@click.option("--read-only", is_flag=True,
              help="docker backend: only discover and call worker containers; never start, restart or remove them.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, envvar="LOG_LEVEL", help="Log verbosity (stderr).")
def serve(tools_dir: Path, host: str, port: int, backend: str, read_only: bool, log_level: str) -> None:
    """Serve every namespace folder in TOOLS_DIR (default: ./tools).

    Each sub-folder is a namespace; each runs in its own worker process. Clients pick a namespace with
    the X-Namespace header. Send SIGHUP (or POST /reload) to pick up changes.
    """
    import uvicorn

    from .runtime.app import create_app
    from .runtime.settings import Settings, SettingsError

    if backend == "process" and not tools_dir.is_dir():
        raise click.ClickException(
            f"tools directory '{tools_dir}' does not exist; create it with one sub-folder per namespace "
            "(see examples/), or pass another directory: tooldock serve DIR"
        )
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    if settings.token_generated:
        click.echo(
            "tooldock: TOOLDOCK_BEARER_TOKEN is not set; this run's bearer token is:\n"
            f"    {settings.bearer_token}\n"
            "Set TOOLDOCK_BEARER_TOKEN to choose your own.",
            err=True,
        )
    sock = _bind(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{sock.getsockname()[1]}"
    if backend == "docker":
        from .builder.daemon import engine

        try:
            engine()
        except BuilderError as exc:
            raise click.ClickException(str(exc)) from None
    app = create_app(tools_dir.resolve(), settings, host, url, backend, read_only)
    config = uvicorn.Config(app, log_config=_uvicorn_log_config(log_level), log_level=log_level)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it already handled: a clean stop, not an abort
        pass


def _bind(host: str, port: int) -> socket.socket:
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


def _cache_dir() -> Path:
    import os

    from .runtime.settings import default_state_dir

    return Path(os.environ["TOOLDOCK_CACHE_DIR"]) if os.environ.get("TOOLDOCK_CACHE_DIR") else default_state_dir() / "build"


@main.command()
@click.argument("namespace_dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--output", "-o", default="build/oci", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory for the OCI image layouts (one sub-directory per namespace).")
@click.option("--base", "base_ref", default=None, metavar="REF",
              help="Base image: an OCI layout directory. Default: the `tooldock base` image, built once and cached.")
@click.option("--tar", "tar_path", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Also write one tar that is both an OCI layout and a `docker load` archive; with several "
                   "namespaces, put {namespace} in the name.")
@click.option("--load", is_flag=True, help="Load each image into the Docker engine as tooldock/<namespace>:<version> "
              "and tooldock/<namespace>:sha256-<digest>.")
@click.option("--push", "push_to", default=None, metavar="REGISTRY/PREFIX",
              help="Push each image to REGISTRY/PREFIX/<namespace>:<version> (OCI distribution API; "
                   "credentials from TOOLDOCK_REGISTRY_USERNAME / TOOLDOCK_REGISTRY_PASSWORD).")
@click.option("--engine", type=click.Choice(["oci", "docker"]), default="oci", show_default=True,
              help="oci: ToolDock writes the layers itself (no daemon). docker: render a Dockerfile and run "
                   "`docker build` (the image lands in the Docker engine).")
@click.option("--gateway", is_flag=True, help="Build an image of the gateway itself (OUTPUT/tooldock-gateway/), "
              "running `tooldock serve /tools` on port 8000.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per namespace on stdout.")
def build(namespace_dirs: tuple[Path, ...], output: Path, base_ref: str | None, tar_path: Path | None,
          load: bool, push_to: str | None, engine: str, gateway: bool, as_json: bool) -> None:
    """Build each NAMESPACE_DIR into its own reproducible OCI image, without a Docker daemon.

    Locks requirements.txt into requirements.lock (next to the namespace; commit it), extracts the tool
    schemas into tools.json and the image labels, and writes OUTPUT/<namespace>/ as an OCI layout.
    Progress goes to stderr; a bad namespace is reported and the others are still built.
    """
    import json

    from rich.console import Console

    from .builder.archive import write_archive
    from .builder.build import Builder, BuildOptions
    from .builder.daemon import load as load_image
    from .builder.gateway import build_gateway
    from .builder.registry import RegistryError, parse_target, push

    if push_to is not None:
        try:
            parse_target(push_to)
        except RegistryError as exc:
            raise click.UsageError(str(exc)) from None
    if not namespace_dirs and not gateway:
        raise click.UsageError("give at least one NAMESPACE_DIR (or --gateway)")
    if gateway and engine == "docker":
        raise click.UsageError("--gateway is built by the oci engine")
    if engine == "docker" and (tar_path or load or push_to):
        raise click.UsageError("--engine docker builds into the Docker engine; --tar, --load and --push need --engine oci")
    if tar_path is not None and len(namespace_dirs) > 1 and "{namespace}" not in str(tar_path):
        raise click.UsageError("with several namespaces, --tar needs {namespace} in the file name")
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    builder = Builder(BuildOptions(output=output, cache=_cache_dir(), base=base_ref), say=lambda m: console.print(f"  {m}"))
    failures = 0
    jobs: list = [None] if gateway else []
    for folder in [*jobs, *namespace_dirs]:
        if engine == "docker":
            failures += _build_with_docker(builder, folder, console, as_json)
            continue
        try:
            with console.status(f"building {folder or 'the gateway image'}"):
                result = builder.build(folder) if folder is not None else build_gateway(builder)
                if tar_path is not None:
                    tar_file = Path(str(tar_path).replace("{namespace}", result.namespace))
                    write_archive(tar_file, builder.store, result.image, result.ref, f"{result.repository}:{result.ref}")
            extra = {}
            if load:
                with console.status(f"loading {result.namespace} into Docker"):
                    extra["loaded"] = load_image(builder.store, result.image, result.repository, result.ref)
                console.print(f"  loaded as {', '.join(extra['loaded'])}")
            if push_to is not None:
                with console.status(f"pushing {result.namespace} to {push_to}"):
                    pushed = push(builder.store, result.image, push_to, result.namespace, result.ref)
                extra["pushed"] = {"reference": pushed.reference, "digest": pushed.digest,
                                   "uploaded": pushed.uploaded, "skipped": pushed.skipped}
                console.print(f"  pushed {pushed.reference} ({len(pushed.uploaded)} blobs uploaded, "
                              f"{len(pushed.skipped)} already there)")
        except BuilderError as exc:
            failures += 1
            console.print(f"[red]✗ {folder or 'gateway'}[/red]: {exc}")
            continue
        total = sum(result.timings.values())
        console.print(f"[green]✓ {result.namespace}[/green] {result.image.manifest_digest} -> {result.layout} "
                      f"({len(result.tools)} tools, {total * 1000:.0f} ms)")
        if as_json:
            click.echo(json.dumps({**result.to_json(), **extra}, sort_keys=True))
    if failures:
        raise click.ClickException(f"{failures} of {len(namespace_dirs) + len(jobs)} image(s) failed to build")


def _build_with_docker(builder, folder: Path, console, as_json: bool) -> int:
    import json

    from .builder.docker_engine import build_with_docker

    try:
        with console.status(f"docker build {folder}"):
            result = build_with_docker(builder, folder)
    except BuilderError as exc:
        console.print(f"[red]✗ {folder}[/red]: {exc}")
        return 1
    console.print(f"[green]✓ {result['namespace']}[/green] {result['image_id']} as {result['tags'][0]} (docker build)")
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
    return 0


@main.command()
@click.option("--output", "-o", default="build/oci/tooldock-base", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Where to write the base image's OCI layout.")
def base(output: Path) -> None:
    """Build the minimal Python base image from pinned Debian packages (apt-get download + dpkg-deb -x).

    Needs apt-get with up-to-date package lists; no Docker. Prints the image digest on stdout.
    """
    from .builder.base import build_base
    from .builder.blobs import BlobStore
    from .builder.oci import write_layout

    store = BlobStore(_cache_dir())
    try:
        image = build_base(store, _cache_dir())
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    write_layout(output, store, image, "base")
    click.echo(image.manifest_digest)


def _settings():
    from .runtime.settings import Settings, SettingsError

    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


@main.command()
@click.argument("targets", nargs=-1, required=True)
@click.option("--env", "-e", "env_pairs", multiple=True, metavar="KEY=VALUE",
              help="Extra environment for the worker containers (repeatable).")
@click.option("--drain", default=30.0, show_default=True, type=click.FloatRange(0),
              help="Seconds a replaced container gets to finish in-flight calls before it is removed.")
@click.option("--base", "base_ref", default=None, metavar="REF", help="Base image when TARGETS are folders (see build).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per namespace on stdout.")
def deploy(targets: tuple[str, ...], env_pairs: tuple[str, ...], drain: float, base_ref: str | None, as_json: bool) -> None:
    """Start (or replace) one hardened worker container per namespace.

    Each TARGET is a namespace folder (built and loaded first) or an image in the Docker engine. Containers
    run as uid 65532 with a read-only root filesystem, no capabilities, no-new-privileges, memory/CPU/pids
    limits from tooldock.yaml and --network none (unless the namespace declares network: egress). Their
    sockets appear under TOOLDOCK_SOCKET_DIR, where `tooldock serve --backend docker` finds them.
    """
    import json

    from rich.console import Console

    from .builder.build import Builder, BuildOptions
    from .builder.daemon import engine
    from .builder.daemon import load as load_image
    from .runtime.deploy import deploy_image

    env = {}
    for pair in env_pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--env {pair!r}: use KEY=VALUE")
        env[key] = value
    settings = _settings()
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        client = engine()
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    builder = Builder(BuildOptions(output=Path("build/oci"), cache=_cache_dir(), base=base_ref),
                      say=lambda m: console.print(f"  {m}"))
    failures = 0
    for target in targets:
        try:
            ref = target
            if Path(target).is_dir():
                with console.status(f"building {target}"):
                    result = builder.build(Path(target))
                    ref = load_image(builder.store, result.image, result.repository, result.ref)[1]
            with console.status(f"starting {ref}"):
                deployed = deploy_image(client, ref, settings.sockets, env, drain=drain)
        except BuilderError as exc:
            failures += 1
            console.print(f"[red]✗ {target}[/red]: {exc}")
            continue
        replaced = f", replaced {', '.join(deployed['replaced'])}" if deployed["replaced"] else ""
        console.print(f"[green]✓ {deployed['namespace']}[/green] running as {deployed['container']}{replaced}")
        if as_json:
            click.echo(json.dumps(deployed, sort_keys=True))
    if failures:
        raise click.ClickException(f"{failures} of {len(targets)} deployment(s) failed")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per container on stdout.")
def ps(as_json: bool) -> None:
    """List worker containers: namespace, container, generation, state, image, socket."""
    import json

    from rich.console import Console
    from rich.table import Table

    from .builder.daemon import engine
    from .runtime.deploy import ps as list_workers

    try:
        rows = list_workers(engine())
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, sort_keys=True))
        return
    table = Table()
    for column in ("namespace", "container", "gen", "status", "healthy", "image"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["namespace"], row["container"], str(row["generation"]), row["status"],
                      "yes" if row["healthy"] else "no", (row["tags"] or [row["image"] or ""])[0][:60])
    Console().print(table)


@main.command()
@click.argument("namespace")
def stop(namespace: str) -> None:
    """Stop and remove the worker container(s) of NAMESPACE."""
    from .builder.daemon import engine
    from .runtime.deploy import stop as stop_workers

    try:
        removed = stop_workers(engine(), namespace, _settings().sockets)
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo("\n".join(removed))


if __name__ == "__main__":
    sys.exit(main())
