"""`tooldock relay`: the stdio MCP server a sandbox runs to use ToolDock's tools through the relay socket
with an API key (seed 002). The work is in `relayclient`, imported only when the command runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from tooldock.envvars import EnvVar, names

DEFAULT_SOCKET = "/run/tooldock-relay/relay.sock"
# Read by `tooldock relay` (docs/reference/settings.md is generated from these); the socket is --socket, whose
# environment variable TOOLDOCK_RELAY_SOCKET is documented with the gateway's relay socket.
SETTINGS_TITLE = "`tooldock relay` (inside a sandbox)"
SETTINGS_INTRO = (
    "`tooldock relay` (inside a sandbox) reads these, and `TOOLDOCK_RELAY_SOCKET` as its `--socket` "
    "(see [Relay socket](../howto/relay-sandbox.md))."
)
SETTINGS: tuple[EnvVar, ...] = (
    EnvVar(
        "TOOLDOCK_API_KEY",
        "—",
        "the API key it sends with every relay request (from `tooldock keys create`)",
    ),
    EnvVar(
        "OUBLIETTE_API_KEY",
        "—",
        "seed 002's name for the same, used when `TOOLDOCK_API_KEY` is unset",
    ),
    EnvVar(
        "TOOLDOCK_API_KEY_FILE",
        "—",
        "a file holding the key instead (only the key; whitespace around it is dropped). Set with "
        "`TOOLDOCK_API_KEY` it is an error; a file it cannot read, that is empty or that holds more than the key "
        "leaves a warning naming the variable and the path (never the content) and no tools",
    ),
)
ENV_VARS = names(SETTINGS)
MAX_KEY_FILE = 4096
PREFIX = re.compile(r"[A-Za-z0-9_.-]*")  # MCP's tool-name characters (SEP-986)
MAX_PREFIX = 64  # MCP tool names are at most 128 characters: leave the tool's own name room


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
@click.option(
    "--prefix",
    default="oubliette_",
    show_default=True,
    callback=lambda ctx, param, value: _checked_prefix(value),
    help="Prepended to every tool name (an empty string for none): at most 64 letters, digits, '_', '-' and '.', "
    "as MCP tool names; refused otherwise.",
)
@click.option(
    "--watch",
    "every",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Ask the socket for the key's tools every this many seconds and tell the client when they change "
    "(0: no timer; changes the gateway announces still arrive at once).",
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


def _checked_prefix(prefix: str) -> str:
    if len(prefix) > MAX_PREFIX or not PREFIX.fullmatch(prefix):
        raise click.BadParameter(
            f"{prefix[:80]!r} cannot start MCP tool names: use at most {MAX_PREFIX} letters, digits, '_', '-' or "
            "'.' (for example 'sandbox_'), or '' for none"
        )
    return prefix


def _key_from(path: str) -> str | None:
    """The API key in the file (its text, whitespace taken off). A file that cannot be read, is empty or
    holds something else leaves a warning (never the file's content) and no key: the relay then serves no
    tools, as it does without a key, rather than failing its MCP client's start."""
    from tooldock.runtime.settings import SettingsError, read_secret_file

    holds = "the API key (tdk_...)"
    try:
        key = read_secret_file("TOOLDOCK_API_KEY_FILE", path, MAX_KEY_FILE, holds)
    except SettingsError as exc:
        problem = str(exc)
    else:
        if not any(c.isspace() for c in key):
            return key
        problem = f"TOOLDOCK_API_KEY_FILE: {path} must hold only {holds}"
    click.echo(f"tooldock relay: warning: {problem}; serving no tools", err=True)
    return None
