"""Markdown for each kind of generated part, from the code. `part(kind, args)` is what a marker becomes."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from tooldock_docs import parts_api, parts_code, parts_config  # noqa: F401  (they register their kinds)
from tooldock_docs.registry import PARTS, REQUIRED, MarkerError

__all__ = ["MarkerError", "cli_commands", "part", "required", "write_downloads"]


def cli_commands(target: str) -> list[str]:
    """The command paths below the click group `module:attr` (`"secrets set"`, ...)."""
    module, _, attr = target.partition(":")
    return _walk(getattr(importlib.import_module(module), attr))


def _walk(group: click.Command, prefix: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(group, click.Group):
        for name, command in sorted(group.commands.items()):
            found.append(f"{prefix}{name}")
            found.extend(_walk(command, f"{prefix}{name} "))
    return found


def required() -> dict[str, list[str] | MarkerError]:
    """Per kind, every item the code has that some page must document (`cli`: "" is `tooldock` itself), or
    the error that kept it from being read."""
    found: dict[str, list[str] | MarkerError] = {}
    for kind, fn in {"cli": lambda: ["", *cli_commands("tooldock.cli:main")], **REQUIRED}.items():
        try:
            found[kind] = fn()
        except Exception as exc:
            found[kind] = MarkerError(f"the {kind} items could not be read from the code: {exc}")
    return found


def part(kind: str, args: list[str]) -> str:
    if kind not in PARTS:
        raise MarkerError(f"unknown kind; the kinds are {', '.join(sorted(PARTS))}")
    return PARTS[kind](args)


def write_downloads(outdir: Path) -> None:
    """Files the pages link to (JSON Schemas, the gateway's OpenAPI document), written into `outdir`."""
    parts_config.write_schemas(outdir / "schemas")
    parts_api.write_openapi(outdir / "openapi")
