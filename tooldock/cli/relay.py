"""`tooldock relay`: the stdio MCP server a sandbox runs to use ToolDock's tools through the relay socket
with an API key (seed 002). The work is in `relayclient`, imported only when the command runs."""

from __future__ import annotations

import os
from pathlib import Path

import click

DEFAULT_SOCKET = "/run/tooldock-relay/relay.sock"
# Read by `tooldock relay` (documented in the README; tests/test_docs.py checks).
ENV_VARS = ("TOOLDOCK_API_KEY", "OUBLIETTE_API_KEY", "TOOLDOCK_API_KEY_FILE")
MAX_KEY_FILE = 4096


@click.command()
@click.option(
    "--socket",
    "socket_path",
    default=DEFAULT_SOCKET,
    show_default=True,
    envvar="TOOLDOCK_RELAY_SOCKET",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The relay socket, as mounted in this sandbox.",
)
@click.option("--prefix", default="oubliette_", show_default=True, help="Prepended to every tool name (`''` for none).")
@click.option(
    "--watch",
    "every",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Ask the socket for the key's tools every this many seconds and tell the client when they change "
    "(0: only when the client lists).",
)
def relay(socket_path: Path, prefix: str, every: float) -> None:
    """Serve the tools an API key allows over MCP on stdio, forwarding each call to the relay socket.

    The key comes from TOOLDOCK_API_KEY (or OUBLIETTE_API_KEY), or from the file TOOLDOCK_API_KEY_FILE
    names (a mounted secret), never from an argument. Without a key, or with a socket that cannot be reached
    or a key it refuses, it warns on stderr and serves no tools.
    """
    from tooldock.cli.relayclient import run

    key = os.environ.get("TOOLDOCK_API_KEY") or os.environ.get("OUBLIETTE_API_KEY") or None
    path = os.environ.get("TOOLDOCK_API_KEY_FILE", "").strip()
    if path:
        if key is not None:
            raise click.UsageError("TOOLDOCK_API_KEY and TOOLDOCK_API_KEY_FILE are both set: keep one")
        key = _key_from(path)
    run(socket_path, prefix, key, every)


def _key_from(path: str) -> str:
    """The API key in the file (its text, whitespace taken off); a clear error, never the file's content."""
    from tooldock.runtime.settings import SettingsError, read_secret_file

    holds = "the API key (tdk_...)"
    try:
        key = read_secret_file("TOOLDOCK_API_KEY_FILE", path, MAX_KEY_FILE, holds)
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    if any(c.isspace() for c in key):
        raise click.ClickException(f"TOOLDOCK_API_KEY_FILE: {path} must hold only {holds}")
    return key
