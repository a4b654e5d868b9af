"""`tooldock deploy`, `tooldock ps`, `tooldock stop`: worker containers in the Docker engine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tooldock.cli.common import cache_dir as _cache_dir
from tooldock.cli.common import settings as _settings
from tooldock.errors import BuilderError

if TYPE_CHECKING:
    from docker import DockerClient
    from rich.console import Console

    from tooldock.builder.build import Builder
    from tooldock.runtime.settings import Settings


@click.command()
@click.argument("targets", nargs=-1)
@click.option(
    "--env",
    "-e",
    "env_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra environment for the worker containers (repeatable). A name the namespace declares under "
    "secrets is refused (it would show in `docker inspect`): store it with `tooldock secrets set`.",
)
@click.option(
    "--drain",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds a replaced container gets to finish in-flight calls before it is removed.",
)
@click.option(
    "--base", "base_ref", default=None, metavar="REF", help="Base image when TARGETS are folders (see build)."
)
@click.option(
    "--gateway",
    is_flag=True,
    help="Also run the gateway itself in a container (docker backend, host network on --host:--port, "
    "the Docker socket mounted; TOOLDOCK_BEARER_TOKEN required).",
)
@click.option(
    "--compose",
    "compose_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="--gateway: write the gateway container as a compose file instead of starting it "
    "(run it with `docker compose -f FILE up -d`).",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="--gateway: address the gateway listens on (host network)."
)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="--gateway: its port.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per namespace on stdout.")
def deploy(
    targets: tuple[str, ...],
    env_pairs: tuple[str, ...],
    drain: float,
    base_ref: str | None,
    gateway: bool,
    compose_path: Path | None,
    host: str,
    port: int,
    as_json: bool,
) -> None:
    """Start (or replace) one hardened worker container per namespace.

    Each TARGET is a namespace folder (built and loaded first) or an image in the Docker engine. Containers
    run as uid 65532 with a read-only root filesystem, no capabilities, no-new-privileges, memory/CPU/pids
    limits from tooldock.yaml and --network none (unless the namespace declares network: egress). Their
    sockets appear under TOOLDOCK_SOCKET_DIR, where `tooldock serve --backend docker` finds them.
    """
    import json

    from rich.console import Console

    from tooldock.builder.build import Builder, BuildOptions
    from tooldock.builder.daemon import engine
    from tooldock.builder.daemon import load as load_image
    from tooldock.namespace.config import read_config
    from tooldock.runtime.backends.deploy import deploy_image, refuse_secret_env

    if compose_path is not None and not gateway:
        raise click.UsageError("--compose writes the gateway's container: use it with --gateway")
    env = {}
    for pair in env_pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--env {pair!r}: use KEY=VALUE")
        env[key] = value
    for target in targets:  # before any build: a folder's declared secrets never go in as plain environment
        if Path(target).is_dir():
            config, _ = read_config(Path(target))
            try:
                refuse_secret_env(Path(target).resolve().name, config.secrets, env)
            except BuilderError as exc:
                raise click.UsageError(str(exc)) from None
    settings = _settings()
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        client = engine()
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    builder = Builder(
        BuildOptions(output=Path("build/oci"), cache=_cache_dir(), base=base_ref), say=lambda m: console.print(f"  {m}")
    )
    if not targets and not gateway:
        raise click.UsageError("give at least one TARGET (or --gateway)")
    failures = 0
    if gateway:
        failures += _deploy_gateway(builder, client, settings, host, port, console, as_json, compose_path)
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


def _deploy_gateway(
    builder: Builder,
    client: DockerClient,
    settings: Settings,
    host: str,
    port: int,
    console: Console,
    as_json: bool,
    compose_path: Path | None = None,
) -> int:
    import json
    import os
    from urllib.parse import urlparse

    from tooldock.atomic import atomic_write
    from tooldock.builder.daemon import load as load_image
    from tooldock.builder.gateway import build_gateway
    from tooldock.runtime.backends import gatewaybox

    if settings.token_generated:
        console.print(
            "[red]✗ gateway[/red]: set TOOLDOCK_BEARER_TOKEN (or TOOLDOCK_BEARER_TOKEN_FILE): the containerised "
            "gateway's clients need to know it"
        )
        return 1
    docker_host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not docker_host.startswith("unix://"):
        console.print(f"[red]✗ gateway[/red]: DOCKER_HOST={docker_host} is not a unix socket to mount into the gateway")
        return 1
    docker_socket, root = Path(urlparse(docker_host).path), settings.sockets.resolve()
    try:
        with console.status("building the gateway image"):
            result = build_gateway(builder)
            ref = load_image(builder.store, result.image, result.repository, result.ref)[1]
        root.mkdir(parents=True, exist_ok=True)
        secrets_dir = (settings.state_dir / "gateway-secrets").absolute()
        gatewaybox.gateway_token_file(secrets_dir, settings.bearer_token, docker_socket.stat().st_gid)
        container = gatewaybox.spec(ref, root, docker_socket, host, port, secrets_dir)
        url = f"http://{host}:{port}"
        if compose_path is not None:
            compose_path.absolute().parent.mkdir(parents=True, exist_ok=True)
            atomic_write(compose_path.absolute(), gatewaybox.compose_text(container).encode())
            started = {"compose": str(compose_path), "image": ref, "url": url}
            console.print(f"[green]✓ gateway[/green] written to {compose_path}: docker compose -f {compose_path} up -d")
        else:
            with console.status("starting the gateway container"):
                started = gatewaybox.deploy_gateway(client, container, url)
            console.print(f"[green]✓ gateway[/green] running as {started['container']} on {started['url']}")
    except (BuilderError, OSError) as exc:
        console.print(f"[red]✗ gateway[/red]: {exc}")
        return 1
    if as_json:
        click.echo(json.dumps(started, sort_keys=True))
    return 0


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per container on stdout.")
def ps(as_json: bool) -> None:
    """List worker containers: namespace, container, generation, state, image, socket."""
    import json

    from rich.console import Console
    from rich.table import Table

    from tooldock.builder.daemon import engine
    from tooldock.runtime.backends.deploy import ps as list_workers

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
        table.add_row(
            row["namespace"],
            row["container"],
            str(row["generation"]),
            row["status"],
            "yes" if row["healthy"] else "no",
            (row["tags"] or [row["image"] or ""])[0][:60],
        )
    Console().print(table)


@click.command()
@click.argument("namespace")
def stop(namespace: str) -> None:
    """Stop and remove the worker container(s) of NAMESPACE."""
    from tooldock.builder.daemon import engine
    from tooldock.runtime.backends.deploy import stop as stop_workers

    try:
        removed = stop_workers(engine(), namespace, _settings().sockets)
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo("\n".join(removed))
