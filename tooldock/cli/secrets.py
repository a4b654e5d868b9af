"""`tooldock secrets`: the only way secret values enter ToolDock (by a person, or CI through stdin).

Values are read from a no-echo prompt, or from stdin when it is not a terminal; never from arguments or
the environment, so they stay out of shell history and `ps`. Commands print status, never values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from tooldock.errors import SecretsError
from tooldock.secrets import SecretStore
from tooldock.secrets.edit import edit as run_edit

NAMESPACE = click.option(
    "--namespace",
    "-n",
    default=None,
    metavar="NS",
    help="The namespace's own scope (default: global, for every namespace that declares it).",
)


def _store() -> SecretStore:
    return SecretStore.from_env()


def _fail(exc: SecretsError | OSError) -> click.ClickException:
    if isinstance(exc, OSError):  # a file the store needs cannot be read or written (permissions, disk full)
        return click.ClickException(f"{exc.filename or 'the secrets store'}: {exc.strerror or exc}")
    return click.ClickException(str(exc))


def _scope(namespace: str | None) -> str:
    return f"namespace {namespace}" if namespace else "global scope"


@click.group()
def secrets() -> None:
    """Manage the encrypted secrets store (values never pass through MCP, REST or chat)."""


@secrets.command()
def init() -> None:
    """Create the age identity (if there is none) and the store; print the identity's recipient."""
    store = _store()
    try:
        recipient = store.init()
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(f"tooldock: age key {store.key_path} (keep it private; back it up); store {store.directory}", err=True)
    click.echo(recipient)


@secrets.group()
def recipients() -> None:
    """Who can decrypt the store (age recipients)."""


@recipients.command("add")
@click.argument("recipient")
def recipients_add(recipient: str) -> None:
    """Let another age identity (a teammate, CI) decrypt the store."""
    try:
        added = _store().add_recipient(recipient)
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    if added:
        click.echo(f"tooldock: the store is now also encrypted to {recipient.strip()}", err=True)
    else:
        click.echo(f"tooldock: the store was already encrypted to {recipient.strip()}", err=True)


@recipients.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def recipients_list(as_json: bool) -> None:
    """The age recipients the store is encrypted to."""
    try:
        found = _store().recipients()
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(json.dumps(found) if as_json else "\n".join(found))


@secrets.command()
def rotate() -> None:
    """Encrypt every value again under a new data key (same recipients)."""
    try:
        _store().rotate()
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    click.echo("tooldock: new data key; every value re-encrypted", err=True)


def _read_value(key: str) -> str:
    if sys.stdin.isatty():
        return str(click.prompt(f"Value for {key}", hide_input=True, confirmation_prompt=True, err=True))
    value = sys.stdin.read()
    return value[:-1] if value.endswith("\n") else value


@secrets.command("set")
@click.argument("key")
@NAMESPACE
def set_(key: str, namespace: str | None) -> None:
    """Set KEY: typed at a hidden prompt, or read from stdin (e.g. `printf %s "$TOKEN" | tooldock secrets set KEY`)."""
    store = _store()
    try:
        store.set(key, _read_value(key), namespace)
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(
        f"tooldock: {key} set ({_scope(namespace)}); reload the gateway to use it (one started with --watch does)",
        err=True,
    )


@secrets.command()
@click.argument("key")
@NAMESPACE
def prepare(key: str, namespace: str | None) -> None:
    """Record KEY as a placeholder: declared as needed, value still to be set."""
    try:
        created = _store().prepare(key, namespace)
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    click.echo(
        f"tooldock: {key} {'is a placeholder now' if created else 'is already set'} ({_scope(namespace)})", err=True
    )


@secrets.command()
@click.argument("key")
@NAMESPACE
def remove(key: str, namespace: str | None) -> None:
    """Remove KEY (its value and its status)."""
    try:
        removed = _store().remove(key, namespace)
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    if not removed:
        raise click.ClickException(f"{key} is not in the store ({_scope(namespace)})")
    click.echo(f"tooldock: {key} removed ({_scope(namespace)}); reload the gateway to apply it", err=True)


def _declared(tools_dir: Path) -> dict[str, list[str]]:
    from tooldock.namespace.scanner import scan_tools_dir

    if not tools_dir.is_dir():
        return {}
    return {s.name: list(s.config.secrets) for s in scan_tools_dir(tools_dir).namespaces if s.config.secrets}


@secrets.command("list")
@NAMESPACE
@click.option(
    "--tools-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default="tools",
    envvar="TOOLDOCK_TOOLS_DIR",
    show_default=True,
    help="Namespaces whose declared secrets are listed as missing when the store lacks them.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def list_(namespace: str | None, tools_dir: Path, as_json: bool) -> None:
    """Status of every secret: set, placeholder, or missing (declared by a namespace, not in the store)."""
    store = _store()
    try:
        rows: list[dict[str, Any]] = store.statuses(namespace)
        for ns, declared in sorted(_declared(tools_dir).items()):
            if namespace is None or ns == namespace:
                rows += [{"key": k, "scope": ns, "status": "missing"} for k in store.check(ns, declared)["missing"]]
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:  # said on stderr, so an empty listing is still empty on stdout
        start = "" if store.exists() else ": there is no store yet (tooldock secrets init makes it)"
        click.echo(f"tooldock: no secrets in {store.directory}{start}", err=True)
    for row in rows:
        click.echo(f"{row['key']:<32} {row['scope']:<24} {row['status']}")


@secrets.command()
@click.argument("namespace_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the JSON object.")
def check(namespace_dir: Path, as_json: bool) -> None:
    """Which secrets NAMESPACE_DIR declares (tooldock.yaml, and a tools.toml's ${secret:NAME}) are satisfied,
    missing or placeholders, and which its code reads without declaring them (the manager's check_secrets).

    Exits 1 unless all are satisfied (nothing missing, no placeholder, nothing undeclared). --json adds
    next_steps."""
    from tooldock.errors import ManagerError
    from tooldock.manager.secrets import check_secrets
    from tooldock.manager.workspace import Workspace

    folder = namespace_dir.resolve()
    try:
        result = check_secrets(Workspace(folder.parent), _store(), folder.name)
    except ManagerError as exc:
        raise click.ClickException(exc.message) from None
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    if as_json:
        click.echo(json.dumps(result))
        return
    for bucket in ("satisfied", "missing", "placeholders", "undeclared"):
        click.echo(f"{bucket}: {', '.join(result[bucket]) or '-'}")
    if result["missing"] or result["placeholders"] or result["undeclared"]:
        sys.exit(1)


@secrets.command()
def edit() -> None:
    """Edit every value in $EDITOR (decrypted to a private tmpfs file that is shredded afterwards)."""
    try:
        counts = run_edit(_store())
    except (SecretsError, OSError) as exc:
        raise _fail(exc) from None
    if not counts["changed"]:
        click.echo("tooldock: no change; the store is as it was", err=True)
        return
    click.echo(f"tooldock: saved {counts['global']} global and {counts['namespaces']} namespace value(s)", err=True)


__all__ = ["secrets"]
