"""What the pages documented, kept in Sphinx's environment, and what they left out.

Kinds listed in REQUIRED must cover every item the code has: a manager tool with no `manager-tool` marker,
a settings group with no `settings` marker, a schema with no `schema` marker, or a CLI command that no
`{click}` directive documents, is reported (a build warning: the strict build fails).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tooldock_docs import generate

CLICK = re.compile(r"^```\{click\} (?P<target>\S+)\n(?P<options>(?::[a-z-]+:.*\n)*)", re.MULTILINE)


def _store(env: Any) -> dict[str, set[tuple[str, str]]]:
    if not hasattr(env, "tooldock_seen"):
        env.tooldock_seen = {}
    return env.tooldock_seen  # type: ignore[no-any-return]


def seen(env: Any, kind: str, args: list[str], docname: str) -> None:
    _store(env).setdefault(docname, set()).add((kind, " ".join(args)))


def scan_click(env: Any, docname: str, text: str) -> None:
    """Record the commands each `{click}` directive of the page documents (its `:prog:`, and with
    `:nested: full` every command below it)."""
    for match in CLICK.finditer(text):
        options = dict(re.findall(r"^:([a-z-]+):\s*(.*)$", match["options"], re.MULTILINE))
        prog = options.get("prog", "").strip()
        command = prog.removeprefix("tooldock").strip()
        seen(env, "cli", [command] if command else [], docname)
        if options.get("nested", "").strip() == "full":
            for sub in generate.cli_commands(match["target"]):
                seen(env, "cli", [f"{command} {sub}".strip()], docname)


def purge(app: Any, env: Any, docname: str) -> None:
    _store(env).pop(docname, None)


def merge(app: Any, env: Any, docnames: set[str], other: Any) -> None:
    for docname in docnames:
        if docname in _store(other):
            _store(env)[docname] = _store(other)[docname]


def missing(env: Any) -> Iterator[str]:
    documented: dict[str, set[str]] = {}
    for items in _store(env).values():
        for kind, arg in items:
            documented.setdefault(kind, set()).add(arg)
    for kind, wanted in generate.required().items():
        if isinstance(wanted, generate.MarkerError):
            yield f"tooldock_docs: {wanted}"
            continue
        for item in sorted(set(wanted) - documented.get(kind, set())):
            yield f"tooldock_docs: {kind} {item!r} is in the code but no page documents it"
        for item in sorted(documented.get(kind, set()) - set(wanted)):
            yield f"tooldock_docs: {kind} {item!r} is documented but the code has no such thing"
