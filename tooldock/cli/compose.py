"""`tooldock compose up|down|init`: ToolDock on one host with Docker Compose (seed 000's "Docker Setup").

`up` reads `.env` next to `docker-compose.yml`, writes the tokens from it and a new age identity (once) as
files under `secrets/` (the compose file mounts them as Docker secrets: never an environment), builds the
gateway's and the manager's images with ToolDock's own builder, loads them (and the base the manager builds
workers on) into the engine, runs `docker compose up -d` (or Debian's `docker-compose`, where the plugin is
missing) and waits until both containers are healthy. `down` stops them; `init` writes the two files.
Progress goes to stderr; `up` prints the two URLs on stdout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tooldock.cli.common import cache_dir

if TYPE_CHECKING:
    from rich.console import Console

FILES = {"docker-compose.yml": "docker-compose.yml", ".env.example": "env.example"}  # written: template
TOKENS = {"BEARER_TOKEN": "bearer_token", "MANAGER_INTERNAL_TOKEN": "manager_token"}  # .env name: secret file
IMAGES = ("gateway", "manager")
TAG = "local"
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def template(name: str) -> str:
    return resources.files("tooldock").joinpath(f"templates/compose/{FILES[name]}").read_text()


def read_env(path: Path) -> dict[str, str]:
    """A `.env` as compose reads it: NAME=value lines, comments and blank lines skipped, quotes taken off."""
    values = {}
    for line in path.read_text().splitlines():
        match = _LINE.match(line)
        if match and not line.lstrip().startswith("#"):
            value = match.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[match.group(1)] = value
    return values


def set_env_line(path: Path, name: str, value: str) -> None:
    """Give `name` a value in `.env`: its (empty) line replaced, or one added."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        match = _LINE.match(line)
        if match and match.group(1) == name and not line.lstrip().startswith("#"):
            lines[i] = f"{name}={value}"
            break
    else:
        lines.append(f"{name}={value}")
    path.write_text("\n".join(lines) + "\n")


def compose_command() -> list[str]:
    """`docker compose` (the plugin) when it answers, else Debian's `docker-compose` (v1)."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise click.ClickException(
        "neither `docker compose` (the Compose plugin) nor `docker-compose` is installed; install one "
        "(Debian/Ubuntu: apt-get install docker-compose)"
    )


def _secret_file(path: Path, text: str) -> None:
    """A file the containers' user (uid 65532) reads through its bind mount: world-readable, in a folder
    only this user can enter (0700), so no other user of this host reads it."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.parent.chmod(0o700)
    if path.is_file() and path.read_text() == text:
        return
    if path.exists():
        path.chmod(0o600)
    path.write_text(text)
    path.chmod(0o444)


def write_secrets(folder: Path, env: dict[str, str]) -> list[str]:
    """secrets/bearer_token and secrets/manager_token from `.env`, secrets/age.key made once."""
    from tooldock.secrets.keys import create_identity

    for name in TOKENS:
        value = env.get(name, "")
        if len(value) < 16 or value.startswith("change_me"):
            raise click.ClickException(
                f"set {name} in {folder / '.env'} to a long random value (at least 16 characters, e.g. the "
                "output of `openssl rand -hex 32`): the containers get it as a file"
            )
    if env["BEARER_TOKEN"] == env["MANAGER_INTERNAL_TOKEN"]:
        raise click.ClickException("BEARER_TOKEN and MANAGER_INTERNAL_TOKEN must differ")
    done = []
    for name, file in TOKENS.items():
        _secret_file(folder / "secrets" / file, env[name] + "\n")
        done.append(file)
    key = folder / "secrets" / "age.key"
    if not key.exists():
        create_identity(key)  # 0600; then readable through the bind mount, as the tokens are
        key.chmod(0o444)
        done.append("age.key (new)")
    return done


def docker_socket(env: dict[str, str]) -> Path:
    if env.get("DOCKER_SOCKET"):
        return Path(env["DOCKER_SOCKET"])
    host = os.environ.get("DOCKER_HOST", "")
    return Path(host.removeprefix("unix://")) if host.startswith("unix://") else Path("/var/run/docker.sock")


def build_and_load(console: Console) -> dict[str, str]:
    """The gateway's and the manager's images (and the manager's base), built and loaded as :local."""
    from tooldock.builder.build import Builder, BuildOptions
    from tooldock.builder.daemon import digest_tag, engine
    from tooldock.builder.daemon import load as load_image
    from tooldock.cli.images import own_image
    from tooldock.errors import BuilderError

    cache = cache_dir()
    builder = Builder(BuildOptions(output=cache / "compose-oci", cache=cache), say=lambda m: console.print(f"  {m}"))
    loaded = {}
    try:
        client = engine()
        base = None
        for which in IMAGES:
            with console.status(f"building the {which} image"):
                result = own_image(builder, which)
            images = [(result.repository, result.image)]
            if which == "manager":
                base = builder.base()[0]
                images.append(("tooldock/base", base))
            for repository, image in images:
                exact = f"{repository}:{digest_tag(image.manifest_digest)}"
                with console.status(f"loading {exact} into Docker"):
                    if not client.images.list(name=exact):  # already there: tagged only
                        load_image(builder.store, image, repository, TAG)
                    client.images.get(exact).tag(repository, TAG)
                loaded[repository] = exact
            console.print(f"[green]✓[/green] {result.repository}:{TAG} = {result.image.manifest_digest[:19]}")
    except BuilderError as exc:
        raise click.ClickException(str(exc)) from None
    return loaded


def run_compose(folder: Path, *args: str, env: dict[str, str] | None = None) -> None:
    command = [*compose_command(), *args]
    proc = subprocess.run(command, cwd=folder, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise click.ClickException(f"`{' '.join(command)}` failed (exit {proc.returncode}); its output is above")


def wait_healthy(folder: Path, console: Console, timeout: float) -> None:
    """Until every container of the project says healthy (the compose file's healthchecks on /health)."""
    from tooldock.builder.daemon import engine

    ids = subprocess.run([*compose_command(), "ps", "-q"], cwd=folder, capture_output=True, text=True).stdout.split()
    client = engine()
    deadline = time.monotonic() + timeout
    with console.status("waiting for the containers to be healthy") as status:
        while True:
            states = {}
            for cid in ids:
                container = client.containers.get(cid)
                health = (container.attrs.get("State") or {}).get("Health") or {}
                states[container.name] = health.get("Status", container.status)
            if states and all(s == "healthy" for s in states.values()):
                return
            status.update(f"waiting for the containers to be healthy: {states}")
            if any(s in ("unhealthy", "exited", "dead") for s in states.values()) or time.monotonic() > deadline:
                raise click.ClickException(
                    f"the containers are not healthy: {states}; see `{' '.join(compose_command())} logs`"
                )
            time.sleep(1)


DIR_OPTION = click.option(
    "--dir",
    "folder",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder holding docker-compose.yml and .env.",
)


@click.group()
def compose() -> None:
    """ToolDock on one host with Docker Compose: the gateway and the manager containers."""


@compose.command()
@DIR_OPTION
@click.option("--timeout", default=180.0, show_default=True, help="Seconds to wait for both to be healthy.")
def up(folder: Path, timeout: float) -> None:
    """Build and load the images, write the secret files, `docker compose up -d`, wait until healthy.

    Reads .env (copy .env.example and set BEARER_TOKEN and MANAGER_INTERNAL_TOKEN). The tokens and a new age
    identity (made once, back it up) go to secrets/ as files, which the containers get as Docker secrets.
    """
    from rich.console import Console

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    env_file = folder / ".env"
    if not (folder / "docker-compose.yml").is_file():
        raise click.ClickException(f"no docker-compose.yml in {folder}: run `tooldock compose init {folder}` first")
    if not env_file.is_file():
        raise click.ClickException(f"no {env_file}: cp {folder / '.env.example'} {env_file}, then set the tokens")
    env = read_env(env_file)
    written = write_secrets(folder, env)
    console.print(f"[green]✓[/green] secrets/: {', '.join(written)}")
    if not env.get("DOCKER_GID"):
        socket = docker_socket(env)
        try:
            gid = socket.stat().st_gid
        except OSError as exc:
            raise click.ClickException(f"cannot find the Docker socket's group ({socket}: {exc.strerror})") from None
        set_env_line(env_file, "DOCKER_GID", str(gid))
        console.print(f"[green]✓[/green] DOCKER_GID={gid} ({socket}'s group) written to {env_file}")
    build_and_load(console)
    console.print(f"{' '.join(compose_command())} up -d")
    run_compose(folder, "up", "-d")
    wait_healthy(folder, console, timeout)
    bind = env.get("TOOLDOCK_BIND") or "127.0.0.1"
    click.echo(f"gateway: http://{bind}:{env.get('CORE_PORT') or 8000} (MCP at /mcp, REST at /tools)")
    click.echo(f"manager: http://{bind}:{env.get('MANAGER_PORT') or 8001}/mcp")


def project_workers(folder: Path) -> list[Any]:
    """The worker containers the project's manager deployed: their socket directories are in its data volume."""
    from tooldock.builder.daemon import engine
    from tooldock.runtime.backends.containers import mounted_socket_dir, worker_containers

    ids = subprocess.run([*compose_command(), "ps", "-q"], cwd=folder, capture_output=True, text=True).stdout.split()
    client = engine()
    roots = set()
    for cid in ids:
        for mount in client.containers.get(cid).attrs.get("Mounts") or []:
            if mount.get("Destination") == "/var/lib/tooldock" and mount.get("Source"):
                roots.add(mount["Source"].rstrip("/") + "/")
    return [
        c for c in worker_containers(client) if any(str(mounted_socket_dir(c) or "").startswith(root) for root in roots)
    ]


@compose.command()
@DIR_OPTION
@click.option("--volumes", "-v", is_flag=True, help="Also delete the data volume (tools, secrets store, keys, logs).")
def down(folder: Path, volumes: bool) -> None:
    """Stop and remove the containers, the worker containers the manager deployed, and the networks."""
    # Stopped first: a running gateway would restart the workers removed next, a running manager deploy more.
    run_compose(folder, "stop")
    for container in project_workers(folder):
        container.remove(force=True)
        click.echo(f"tooldock: removed worker container {container.name}", err=True)
    run_compose(folder, "down", *(["--volumes"] if volumes else []))


@compose.command()
@click.argument("folder", default=".", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite files that are there and differ.")
def init(folder: Path, force: bool) -> None:
    """Write docker-compose.yml and .env.example into FOLDER (default: here), as a checkout has them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        path, text = folder / name, template(name)
        if path.exists() and path.read_text() != text and not force:
            raise click.ClickException(f"{path} is there and differs; --force overwrites it")
        path.write_text(text)
        click.echo(f"tooldock: wrote {path}", err=True)
    click.echo(f"next: cp {folder / '.env.example'} {folder / '.env'}, set the tokens, tooldock compose up", err=True)
