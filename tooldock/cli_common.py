"""Helpers the CLI commands share."""

from __future__ import annotations

import os
from pathlib import Path

import click


def cache_dir() -> Path:
    from .runtime.settings import default_state_dir

    return Path(os.environ["TOOLDOCK_CACHE_DIR"]) if os.environ.get("TOOLDOCK_CACHE_DIR") else default_state_dir() / "build"


def settings():
    from .runtime.settings import Settings, SettingsError

    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
