"""The kinds of generated parts: each kind's Markdown maker, and for some the items every page set must cover."""

from __future__ import annotations

from collections.abc import Callable

PARTS: dict[str, Callable[[list[str]], str]] = {}
REQUIRED: dict[str, Callable[[], list[str]]] = {}


class MarkerError(Exception):
    pass


def kind(
    name: str, required: Callable[[], list[str]] | None = None
) -> Callable[[Callable[[list[str]], str]], Callable[[list[str]], str]]:
    """Register the function making kind `name`'s Markdown; `required`: the args that must each have a marker."""

    def register(fn: Callable[[list[str]], str]) -> Callable[[list[str]], str]:
        PARTS[name] = fn
        if required is not None:
            REQUIRED[name] = required
        return fn

    return register


def cell(text: object) -> str:
    """`text` fit for one cell of a Markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def no_args(args: list[str]) -> None:
    if args:
        raise MarkerError("takes no arguments")
