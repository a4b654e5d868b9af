"""`tooldock keys`: API keys for sandboxes (the relay socket) and HTTP clients, scoped read | write | admin
and narrowed by namespace and tool globs. A key is printed once, by `create`; the store keeps its hash."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from tooldock.errors import KeysError
from tooldock.keys import SCOPES, ApiKey, KeyStore
from tooldock.keys.validate import parse_duration


def _fail(exc: KeysError | OSError) -> click.ClickException:
    if isinstance(exc, OSError):  # the keys directory cannot be written (permissions, disk full)
        return click.ClickException(f"{exc.filename or 'the keys file'}: {exc.strerror or exc}")
    return click.ClickException(str(exc))


@click.group()
def keys() -> None:
    """Manage API keys (stored hashed in TOOLDOCK_KEYS_DIR; a key is shown once, when it is created)."""


@keys.command()
@click.option("--name", required=True, help="What the key is for (shown by `keys list` and in the gateway's log).")
@click.option(
    "--scope",
    type=click.Choice(SCOPES),
    required=True,
    help="read: tools annotated readOnlyHint only; write: every tool; admin: everything, the manager included.",
)
@click.option(
    "--namespace", "namespaces", multiple=True, metavar="GLOB", help="Only namespaces matching GLOB (repeatable)."
)
@click.option(
    "--tool",
    "tools",
    multiple=True,
    metavar="GLOB",
    help="Only tools matching GLOB: a tool name (get_*), or NAMESPACE/TOOL (weather/forecast); repeatable.",
)
@click.option("--expires", metavar="DURATION", help="Lifetime, e.g. 90m, 12h, 30d, 1w2d (default: never expires).")
@click.option(
    "--rate",
    type=float,
    metavar="CALLS",
    help="Rate limit: calls per second, bursts of the rate rounded up (default: unlimited).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object with the key and its record.")
def create(
    name: str,
    scope: str,
    namespaces: tuple[str, ...],
    tools: tuple[str, ...],
    expires: str | None,
    rate: float | None,
    as_json: bool,
) -> None:
    """Create a key and print it once (stdout); only its hash is stored."""
    try:
        expires_in = parse_duration(expires) if expires is not None else None
        record, key = KeyStore.from_env().create(name, scope, namespaces, tools, expires_in, rate)
    except (KeysError, OSError) as exc:
        raise _fail(exc) from None
    if as_json:
        click.echo(json.dumps({"key": key, **record.to_dict()}))
        return
    click.echo(
        f"tooldock: API key {record.id} ({record.name!r}, scope {record.scope}) created; it is shown only now",
        err=True,
    )
    click.echo(key)


@keys.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def list_(as_json: bool) -> None:
    """List keys: id, name, scope, globs, state, times (never a key)."""
    try:
        found = KeyStore.from_env().list()
    except (KeysError, OSError) as exc:
        raise _fail(exc) from None
    now = datetime.now(UTC)
    if as_json:
        click.echo(json.dumps([{**k.to_dict(), "state": k.state(now)} for k in found]))
        return
    if not found:
        click.echo("tooldock: no API keys yet (tooldock keys create makes one)", err=True)
        return
    for key in found:
        click.echo(_line(key, now))


def _line(key: ApiKey, now: datetime) -> str:
    data = key.to_dict()
    globs = ",".join(key.namespaces) or "*"
    if key.tools:
        globs += " tools=" + ",".join(key.tools)
    return "  ".join(
        [
            key.id,
            key.scope.ljust(5),
            key.state(now).ljust(7),
            f"namespaces={globs}",
            f"created={data['created']}",
            f"expires={data['expires'] or 'never'}",
            f"last_used={data['last_used'] or 'never'}",
            key.name,
        ]
    )


@keys.command()
@click.argument("key_id")
def revoke(key_id: str) -> None:
    """Revoke the key KEY_ID: every call with it fails from now on."""
    try:
        record = KeyStore.from_env().revoke(key_id)
    except (KeysError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(f"tooldock: API key {record.id} ({record.name!r}) revoked", err=True)
