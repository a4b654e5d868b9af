"""`tooldock manager`: the manager MCP server (its own process, next to a running gateway)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from tooldock.cli.common import cache_dir, refuse_namespace_folder
from tooldock.cli.serve import listen, listen_options, log_level_option, run_app, tools_dir_argument


@click.command()
@tools_dir_argument
@listen_options(8001, "MANAGER_PORT")
@click.option(
    "--gateway-url",
    default=None,
    metavar="URL",
    help="Where the gateway is [default: TOOLDOCK_GATEWAY_URL, else CORE_URL, else http://127.0.0.1:8000].",
)
@click.option(
    "--backend",
    type=click.Choice(["process", "docker"]),
    default="process",
    show_default=True,
    envvar="TOOLDOCK_BACKEND",
    help="The gateway's backend. docker: reload_core rebuilds changed namespaces' images and deploys them.",
)
@click.option(
    "--watch/--no-watch",
    default=None,
    help="Reload after edits under TOOLS_DIR [default: ENABLE_FS_WATCHER, else off].",
)
@log_level_option
def manager(
    tools_dir: Path, host: str, port: int, gateway_url: str | None, backend: str, watch: bool | None, log_level: str
) -> None:
    """Serve the manager's MCP tools for TOOLS_DIR (default: ./tools) on --port (8001).

    An LLM connected to it writes tools, manages requirements and secret placeholders, and calls
    reload_core, which signals the gateway (POST /reload with MANAGER_INTERNAL_TOKEN; set the same
    TOOLDOCK_BEARER_TOKEN and MANAGER_INTERNAL_TOKEN for both). `tooldock serve --manager` runs both.
    """
    import dataclasses

    from tooldock.manager.app import create_manager_app
    from tooldock.manager.settings import ManagerSettings
    from tooldock.runtime.settings import SettingsError

    seed_dir = os.environ.get("TOOLDOCK_SEED_DIR")
    if seed_dir:  # the manager's image (tooldock compose): examples, build cache, secrets store
        from tooldock.manager.seed import seed
        from tooldock.runtime.settings import default_state_dir

        seed(Path(seed_dir), tools_dir, cache_dir(), Path(os.environ.get("TOOLDOCK_STATE_DIR") or default_state_dir()))
    if not tools_dir.is_dir():
        raise click.ClickException(
            f"tools directory '{tools_dir}' does not exist; create it (one sub-folder per namespace) "
            "or pass the directory the gateway serves: tooldock manager DIR"
        )
    refuse_namespace_folder(tools_dir, "manager")
    try:
        settings = ManagerSettings.from_env(tools_dir, gateway_url, backend)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    if watch is not None:
        settings = dataclasses.replace(settings, watch=watch)
    if settings.runtime.log_format == "json":  # from the first line on, as `tooldock serve` does
        from tooldock.runtime.logs import use_json_lines

        use_json_lines()
    if settings.runtime.token_generated:
        click.echo(
            "tooldock manager: TOOLDOCK_BEARER_TOKEN is not set; this run's bearer token is:\n"
            f"    {settings.runtime.bearer_token}\n"
            "The manager calls the gateway with it too: set TOOLDOCK_BEARER_TOKEN for both.",
            err=True,
        )
    if settings.runtime.manager_token is None:
        click.echo("tooldock manager: MANAGER_INTERNAL_TOKEN is not set; reload_core will not work", err=True)
    sock, url = listen(host, port)
    try:
        app = create_manager_app(settings, cache_dir(), host, sock.getsockname()[1])
    except SettingsError as exc:  # TOOLDOCK_MANAGER_OAUTH_RESOURCE needed
        raise click.ClickException(str(exc)) from None
    click.echo(f"tooldock manager: ready on {url} (MCP at {url}/mcp)", err=True)
    run_app(app, sock, log_level, settings.runtime)
