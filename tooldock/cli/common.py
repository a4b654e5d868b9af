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
        Path(os.environ["TOOLDOCK_CACHE_DIR"])
        if os.environ.get("TOOLDOCK_CACHE_DIR")
        else default_state_dir() / "build"
    )


def settings() -> Settings:
    from tooldock.runtime.settings import Settings, SettingsError

    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
