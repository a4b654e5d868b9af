"""The environment variables ToolDock reads, described where they are read.

Each module that reads settings from the environment declares them next to that code:

    SETTINGS_TITLE = "Gateway (`tooldock serve`)"
    SETTINGS_INTRO = "Environment variables read by `tooldock serve`; ..."
    SETTINGS: tuple[EnvVar, ...] = (EnvVar("TOOL_CALL_TIMEOUT_SECONDS", "`30`", "per-call timeout, ..."), ...)
    ENV_VARS = names(SETTINGS)

The settings reference (docs/reference/settings.md) is generated from these, so `default` and `meaning` are
Markdown as that page shows them, with links relative to it. Imports nothing from tooldock: every layer may use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str  # the variable, e.g. TOOL_CALL_TIMEOUT_SECONDS
    default: str  # Markdown: "`30`", "generated per run", "unset", "`$TOOLDOCK_STATE_DIR/logs`", "—"
    meaning: str  # Markdown, one paragraph


def names(settings: Iterable[EnvVar]) -> tuple[str, ...]:
    """The variables' names, in order (a module's ENV_VARS)."""
    return tuple(setting.name for setting in settings)
