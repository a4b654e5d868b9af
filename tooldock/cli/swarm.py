"""`tooldock swarm up|render|status|down`: ToolDock on Docker Swarm (tooldock/swarm/). Progress on stderr;
`up` prints the gateway's URL on stdout (and the bearer token, once, when it made one)."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from tooldock.cli.common import cache_dir

STACK_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,29}")

stack_option = click.option(
    "--stack", default="tooldock", show_default=True, help="The stack's name (prefix of its services and secrets)."
)
state_option = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the cluster CA, its certificates and the secret names are kept "
    "[default: ~/.local/state/tooldock/swarm/STACK].",
)


@contextlib.contextmanager
def _engine_errors() -> Iterator[None]:
    """docker-py's and requests' errors (the engine gone, an API refusal) as one line, not a traceback."""
    from docker.errors import DockerException
    from requests.exceptions import RequestException

    try:
        yield
    except (DockerException, RequestException) as exc:
        raise click.ClickException(f"the Docker engine failed: {exc}") from None


def _say(message: str) -> None:
    click.echo(f"tooldock: {message}", err=True)


def _checked_stack(stack: str) -> str:
    if not STACK_RE.fullmatch(stack):
        raise click.ClickException(f"--stack {stack!r}: lower-case letters, digits, '-' and '_', at most 30")
    return stack


def _require_signed(built: list[Any]) -> None:
    """Signed-only mode (TOOLDOCK_REQUIRE_SIGNED_BY): each namespace image, as pushed, signed by one of its keys;
    ClickException naming the first that is not, before anything is made or deployed in the swarm."""
    from tooldock.runtime.backends.signedonly import UnsignedImage, require_signed, required_keys

    keys = required_keys()
    if not keys:
        return
    for image in built:
        try:
            require_signed(image.reference, keys)
        except UnsignedImage as exc:
            raise click.ClickException(
                f"namespace {image.name}: {exc}; or run `tooldock swarm up --sign-key KEY.key` to sign the images "
                "it pushes. Nothing was deployed or changed in the swarm."
            ) from None
    _say(f"signed-only mode: {len(built)} namespace image(s) signed by a key of TOOLDOCK_REQUIRE_SIGNED_BY")


def _prepare(
    tools_dir: Path,
    registry: str,
    replicas: int,
    port: int,
    publish: str,
    stack: str,
    state_dir: Path | None,
    sign_key: Path | None,
) -> tuple[Any, Any, Any]:
    """Images built, pushed (and signed), the plan made, its secrets and configs in the swarm: (engine, planned,
    state). In signed-only mode the namespace images are checked before anything is made in the swarm."""
    from tooldock.builder.registry import RegistryError
    from tooldock.errors import BuilderError
    from tooldock.secrets.store import SecretStore
    from tooldock.swarm import engine as swarm_engine
    from tooldock.swarm.images import ImageMaker, namespace_dirs
    from tooldock.swarm.plan import PlanError, make_plan
    from tooldock.swarm.state import SwarmState, default_dir

    if not re.fullmatch(r"[A-Za-z0-9.-]+(:[0-9]+)?", registry):
        raise click.ClickException(f"--registry {registry!r}: HOST:PORT of the registry every node pulls from")
    folders = namespace_dirs(tools_dir)
    if not folders:
        raise click.ClickException(f"{tools_dir} has no namespace folders")
    from tooldock.cli.signing import private_key

    key = private_key(sign_key) if sign_key is not None else None  # asked once, before any build
    try:
        engine = swarm_engine.client()
        swarm_engine.check_manager(engine)
        maker = ImageMaker(registry, cache_dir() / "swarm-oci", cache_dir(), _say, key)
        built = [maker.namespace(folder) for folder in folders]
        _require_signed(built)
        images = {"gateway": maker.gateway(), "redis": maker.program("redis")}
        if publish == "edge":
            images["haproxy"] = maker.program("haproxy")
        state = SwarmState(state_dir or default_dir(stack), stack)
        existing = swarm_engine.existing_secrets(engine, stack)
        planned = make_plan(state, images, built, existing, SecretStore.from_env(), replicas, port, publish)  # type: ignore[arg-type]
        made = swarm_engine.ensure_secrets(engine, stack, planned.secrets)
        swarm_engine.ensure_configs(engine, stack, planned.configs)
        state.record(planned.generated)
        if made:
            _say(f"{len(made)} Docker secret(s) made")
    except (BuilderError, RegistryError, PlanError, swarm_engine.SwarmError) as exc:
        raise click.ClickException(str(exc)) from None
    return engine, planned, state


common = [
    click.argument("tools_dir", type=click.Path(exists=True, file_okay=False, path_type=Path)),
    click.option("--registry", required=True, help="HOST:PORT of the registry the images go to and nodes pull from."),
    click.option("--replicas", default=2, show_default=True, type=click.IntRange(1, 32), help="Gateway replicas."),
    click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="Published port."),
    click.option(
        "--publish",
        type=click.Choice(["mesh", "edge"]),
        default="mesh",
        show_default=True,
        help="mesh: the gateway's port published by the routing mesh (needs IPVS in every node's kernel); "
        "edge: an HAProxy task published on the node (host mode) in front of the gateway replicas.",
    ),
    click.option(
        "--sign-key",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Sign every image pushed with this cosign key (PREFIX.key, `tooldock keygen`; passphrase from "
        "TOOLDOCK_SIGNING_PASSWORD or a prompt). With TOOLDOCK_REQUIRE_SIGNED_BY set, each namespace image must be "
        "signed by one of its keys, else nothing is deployed.",
    ),
    stack_option,
    state_option,
]


def with_common(function: Any) -> Any:
    for decorator in reversed(common):
        function = decorator(function)
    return function


def engine_errors(function: Any) -> Any:
    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with _engine_errors():
            return function(*args, **kwargs)

    return wrapped


@click.group()
def swarm() -> None:
    """ToolDock on Docker Swarm: gateway replicas, Redis and one service per namespace, as one stack."""


@swarm.command()
@with_common
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait until every service is ready.")
@click.option("--json", "as_json", is_flag=True, help="Print the URL and the services as one JSON object.")
@engine_errors
def up(
    tools_dir: Path,
    registry: str,
    replicas: int,
    port: int,
    publish: str,
    stack: str,
    state_dir: Path | None,
    sign_key: Path | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Build and push every image, make the secrets, deploy or update the stack, wait until it is ready.

    Run again after an edit: only the namespaces whose image changed roll out (start-first). The bearer
    token is TOOLDOCK_BEARER_TOKEN, or made here and printed once. With TOOLDOCK_REQUIRE_SIGNED_BY set
    (signed-only mode), a namespace image without a valid signature by one of its keys stops it before
    anything is made or deployed in the swarm (--sign-key signs them).
    """
    import tempfile

    from tooldock.swarm import engine as swarm_engine
    from tooldock.swarm.stack import render

    stack = _checked_stack(stack)
    engine, planned, _ = _prepare(tools_dir, registry, replicas, port, publish, stack, state_dir, sign_key)
    before = swarm_engine.images(engine, stack)
    text = render(planned.plan, stack)
    for service, image in sorted(_wanted_images(planned.plan).items()):
        if service not in before:
            _say(f"{service}: new")
        elif before[service] != image:
            _say(f"{service}: rolling out {image.rpartition('@')[2][:19]}")
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".yml", prefix="tooldock-stack-") as handle:
            handle.write(text)
            handle.flush()
            _say(f"docker stack deploy {stack}")
            swarm_engine.deploy(stack, Path(handle.name))
        states = swarm_engine.wait_ready(engine, stack, timeout, _say)
        keep = set(planned.secrets) | set(planned.configs)
        removed = swarm_engine.prune(engine, stack, keep)
        if removed:
            _say(f"removed {len(removed)} superseded secret(s) or config(s)")
    except swarm_engine.SwarmError as exc:
        raise click.ClickException(str(exc)) from None
    url = f"http://127.0.0.1:{port}"
    if planned.new_token:
        _say("the bearer token (made now, shown once; it is kept as a Docker secret):")
        click.echo(f"token: {planned.new_token}")
    if as_json:
        click.echo(json.dumps({"url": url, "stack": stack, "services": states}, sort_keys=True))
    else:
        click.echo(f"gateway: {url} (MCP at /mcp, REST at /tools)")


def _wanted_images(plan: Any) -> dict[str, str]:
    from tooldock.swarm.stack import service_name

    found = {"gateway": plan.gateway_image, "redis": plan.redis_image}
    if plan.publish == "edge":
        found["edge"] = plan.edge_image
    found |= {service_name(ns.name): ns.image for ns in plan.namespaces}
    return found


@swarm.command("render")
@with_common
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the stack file here (default: stdout).",
)
@engine_errors
def render_command(
    tools_dir: Path,
    registry: str,
    replicas: int,
    port: int,
    publish: str,
    stack: str,
    state_dir: Path | None,
    sign_key: Path | None,
    output: Path | None,
) -> None:
    """Build and push the images, make the secrets, and write the stack file without deploying it.

    Then `docker stack deploy --resolve-image never -c FILE STACK` deploys it.
    """
    from tooldock.atomic import atomic_write
    from tooldock.swarm.stack import render

    stack = _checked_stack(stack)
    _, planned, _ = _prepare(tools_dir, registry, replicas, port, publish, stack, state_dir, sign_key)
    text = render(planned.plan, stack)
    if output is None:
        click.echo(text, nl=False)
    else:
        atomic_write(output, text.encode())
        _say(f"wrote {output}")
    if planned.new_token:
        _say(f"the bearer token (made now, shown once): {planned.new_token}")


@swarm.command()
@stack_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per service.")
@engine_errors
def status(stack: str, as_json: bool) -> None:
    """The stack's services: replicas running, update state, image digest."""
    from tooldock.swarm import engine as swarm_engine

    try:
        engine = swarm_engine.client()
        states = [swarm_engine.service_state(s) for s in swarm_engine.services(engine, _checked_stack(stack))]
    except swarm_engine.SwarmError as exc:
        raise click.ClickException(str(exc)) from None
    if not states:
        raise click.ClickException(f"no stack {stack!r} here (tooldock swarm up deploys it)")
    for state in states:
        if as_json:
            click.echo(json.dumps(state, sort_keys=True))
        else:
            health = "ready" if state["ready"] else "not ready"
            click.echo(
                f"{state['service']:32} {state['replicas']:>6} {health:9} {state['update']:10} "
                f"{state['digest'][:19]} {' '.join(state['errors'])}".rstrip()
            )


@swarm.command()
@stack_option
@state_option
@click.option("--volumes", is_flag=True, help="Also remove the stack's volumes (Redis's data).")
@engine_errors
def down(stack: str, state_dir: Path | None, volumes: bool) -> None:
    """Remove the stack, its secrets and configs (and with --volumes its volumes); the CA is kept."""
    from tooldock.swarm import engine as swarm_engine
    from tooldock.swarm.state import SwarmState, default_dir

    stack = _checked_stack(stack)
    try:
        gone = swarm_engine.remove(swarm_engine.client(), stack, volumes)
    except swarm_engine.SwarmError as exc:
        raise click.ClickException(str(exc)) from None
    SwarmState(state_dir or default_dir(stack), stack).forget()
    _say(f"removed: {', '.join(gone) if gone else 'nothing (no such stack)'}")
