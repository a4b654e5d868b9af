"""`tooldock install`: a namespace added to (or updated in) an MCP client's configuration file.

Each client keeps its MCP servers in a JSON file at its usual place for the platform; the namespace's entry
(`tooldock-<namespace>`, the gateway's `/ns/<namespace>/mcp` URL) is added or replaced there, every other
entry and key kept as it was, the file before the change kept as `<file>.bak`, the new one written in one
step (tooldock/atomic.py). The key is not written where the client can do without it:

    claude-desktop  mcpServers, through the `mcp-remote` bridge (Desktop starts commands); it cannot read
                    the environment, so the key's value goes in the entry's `env`, the only copy written
    claude-code     ~/.claude.json (user scope) mcpServers, `"Bearer ${VAR}"`: read from its environment
    cursor          ~/.cursor/mcp.json mcpServers, `"Bearer ${env:VAR}"`: read from its environment
    vscode          the user's mcp.json servers, `"Bearer ${input:tooldock-key}"`: VS Code asks for the key
                    once and keeps it in its secret storage
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from tooldock.atomic import atomic_write

CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")
DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_KEY_VAR = "TOOLDOCK_BEARER_TOKEN"
VSCODE_INPUT = "tooldock-key"
AUTH_VAR = "TOOLDOCK_AUTHORIZATION"  # the Authorization header's value in a claude-desktop entry's env


def _app_data(*parts: str) -> Path:
    """A per-user application folder: macOS's Application Support, Windows's APPDATA, else XDG_CONFIG_HOME."""
    home = Path.home()
    if sys.platform == "darwin":
        return home.joinpath("Library", "Application Support", *parts)
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming").joinpath(*parts)
    return Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config").joinpath(*parts)


def config_path(client: str) -> Path:
    """Where the client keeps its MCP servers (user-wide)."""
    if client == "claude-desktop":
        return _app_data("Claude", "claude_desktop_config.json")
    if client == "claude-code":
        return Path.home() / ".claude.json"
    if client == "cursor":
        return Path.home() / ".cursor" / "mcp.json"
    return _app_data("Code", "User", "mcp.json")


def entry_for(client: str, url: str, key_var: str) -> tuple[str, dict[str, Any]]:
    """The key of the client's table of servers and the namespace's entry in it."""
    if client == "claude-desktop":
        key = os.environ.get(key_var)
        if not key:
            raise click.ClickException(
                f"set {key_var} to the gateway's key: Claude Desktop cannot read it from its environment, so it "
                "is written into its configuration file (or choose the variable with --key-from-env)"
            )
        args = ["-y", "mcp-remote", url, "--header", f"Authorization:${{{AUTH_VAR}}}"]
        return "mcpServers", {"command": "npx", "args": args, "env": {AUTH_VAR: f"Bearer {key}"}}
    if client == "claude-code":
        return "mcpServers", {"type": "http", "url": url, "headers": {"Authorization": f"Bearer ${{{key_var}}}"}}
    if client == "cursor":
        return "mcpServers", {"url": url, "headers": {"Authorization": f"Bearer ${{env:{key_var}}}"}}
    headers = {"Authorization": f"Bearer ${{input:{VSCODE_INPUT}}}"}
    return "servers", {"type": "http", "url": url, "headers": headers}


def _vscode_input() -> dict[str, Any]:
    return {"type": "promptString", "id": VSCODE_INPUT, "description": "ToolDock gateway key", "password": True}


def merged(current: dict[str, Any], client: str, table: str, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """`current` with the entry added or replaced; nothing else changes."""
    servers = current.get(table, {})
    if not isinstance(servers, dict):
        raise click.ClickException(f'its "{table}" is not a JSON object: fix it by hand first')
    result = {**current, table: {**servers, name: entry}}
    if client == "vscode":
        inputs = current.get("inputs", [])
        if not isinstance(inputs, list):
            raise click.ClickException('its "inputs" is not a JSON list: fix it by hand first')
        if not any(isinstance(i, dict) and i.get("id") == VSCODE_INPUT for i in inputs):
            result["inputs"] = [*inputs, _vscode_input()]
    return result


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.ClickException(f"{path} is not readable JSON ({exc}); it was not changed") from None
    if not isinstance(found, dict):
        raise click.ClickException(f"{path} does not hold a JSON object; it was not changed")
    return found


def namespace_name(given: str) -> str:
    """The namespace: a name, or the path of its folder."""
    from tooldock.namespace.names import NamespaceNameError, validate_namespace_name

    name = Path(given).name if ("/" in given or os.sep in given or Path(given).is_dir()) else given
    try:
        validate_namespace_name(name)
    except NamespaceNameError as exc:
        raise click.ClickException(str(exc)) from None
    return name


@click.command()
@click.argument("client", metavar="CLIENT")
@click.argument("namespace")
@click.option("--url", default=DEFAULT_URL, show_default=True, help="The gateway's base URL.")
@click.option(
    "--key-from-env",
    "key_var",
    default=DEFAULT_KEY_VAR,
    show_default=True,
    metavar="VAR",
    help="The environment variable holding the gateway's key (its bearer token or an API key). Claude Code "
    "and Cursor read it when they start; VS Code asks for the key instead; for Claude Desktop its value is "
    "read now and written into the file.",
)
@click.option(
    "--config", "config_file", type=click.Path(path_type=Path), help="Another file than the client's usual one."
)
@click.option("--print", "only_print", is_flag=True, help="Only print the entry as JSON; change no file.")
def install(client: str, namespace: str, url: str, key_var: str, config_file: Path | None, only_print: bool) -> None:
    """Add NAMESPACE to CLIENT's MCP configuration (claude-desktop, claude-code, cursor or vscode).

    The entry, `tooldock-NAMESPACE`, points at the gateway's /ns/NAMESPACE/mcp; if the file has it already,
    it is replaced. The client's other servers and settings are left as they are, the previous file is kept
    as FILE.bak, and the new one is written in one step. The key is referenced from the environment where
    the client can read it (see --key-from-env). Prints the file written (the entry with --print); restart
    the client to load it.

    \b
    Files:
      claude-desktop  Claude/claude_desktop_config.json in the user's config folder
                      (~/Library/Application Support, %APPDATA%, or ~/.config)
      claude-code     ~/.claude.json
      cursor          ~/.cursor/mcp.json
      vscode          Code/User/mcp.json in the user's config folder
    """
    if client not in CLIENTS:
        raise click.ClickException(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    name = namespace_name(namespace)
    if not url.startswith(("http://", "https://")):
        raise click.ClickException(f"--url must be an http:// or https:// URL, not {url!r}")
    base = url.rstrip("/").removesuffix("/mcp").rstrip("/")
    table, entry = entry_for(client, f"{base}/ns/{name}/mcp", key_var)
    server = f"tooldock-{name}"
    if only_print:
        printed: dict[str, Any] = {table: {server: entry}}
        if client == "vscode":
            printed["inputs"] = [_vscode_input()]
        click.echo(json.dumps(printed, indent=2))
        return
    path = config_file or config_path(client)
    current = _read(path)
    new = merged(current, client, table, server, entry)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
        if path.exists():
            shutil.copy2(path, path.with_name(path.name + ".bak"))
        atomic_write(path, (json.dumps(new, indent=2, ensure_ascii=False) + "\n").encode(), mode=mode)
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None
    verb = "updated" if server in (current.get(table) or {}) else "added"
    click.echo(str(path))
    click.echo(f"{verb} {server} in {path}; restart {client} to load it", err=True)
