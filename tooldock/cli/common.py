"""Helpers the CLI commands share."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from tooldock.runtime.settings import Settings


def cache_dir() -> Path:
    from tooldock.runtime.settings import default_state_dir

    return (
        Path(os.environ["TOOLDOCK_CACHE_DIR"]).expanduser()
        if os.environ.get("TOOLDOCK_CACHE_DIR")
        else default_state_dir() / "build"
    )


def settings() -> Settings:
    from tooldock.runtime.settings import Settings, SettingsError

    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None


def writable_state_dir(state_dir: Path) -> None:
    """The state directory (environments, sockets' helpers, logs) exists or can be made, and this user can
    write in it; a ClickException naming it otherwise (not a traceback from the first write deep inside)."""
    import tempfile

    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=state_dir):
            pass
    except OSError as exc:
        raise click.ClickException(
            f"the state directory {state_dir} cannot be used: {exc.strerror or exc}; set TOOLDOCK_STATE_DIR to a "
            "directory this user can write (it holds the worker environments and the logs)"
        ) from None


def refuse_namespace_folder(tools_dir: Path, command: str) -> None:
    """A namespace folder given where a directory of namespaces is expected (`serve examples/basic-tool`):
    tool files or a tools.toml directly in it and no sub-folder. It would serve nothing, silently; say which
    directory to give instead."""
    from tooldock.namespace.toolsfile import TOOLS_FILE

    if not tools_dir.is_dir() or not (any(tools_dir.glob("*.py")) or (tools_dir / TOOLS_FILE).is_file()):
        return
    if any(p.is_dir() and not p.name.startswith(("_", ".")) for p in tools_dir.iterdir()):
        return
    raise click.ClickException(
        f"{tools_dir} is a namespace folder itself (tool files or a tools.toml in it), not a directory of "
        f"namespace folders; give its parent: tooldock {command} {tools_dir.absolute().parent}"
    )
