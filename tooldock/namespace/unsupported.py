"""fastmcp features a tool file may use that ToolDock does not serve, found in its source for `tooldock check`.

Session visibility (`ctx.enable_components()`, `ctx.disable_components()`, `ctx.reset_visibility()`) fails
at the call behind ToolDock (worker/visibility.py says why); `check` warns of each call with its line, so the
author hears of it before a client does. Read from the text, as the rest of the static scan reads it: a call
spelt another way (`getattr(ctx, name)()`) is found at the call only.
"""

from __future__ import annotations

import re

VISIBILITY_CALL = re.compile(r"\.(enable_components|disable_components|reset_visibility)\s*\(")


MESSAGE = (
    "ctx.{}() fails behind ToolDock: the gateway lists a namespace's tools, resources and prompts the same for "
    "every session (session visibility is not supported); leave it out, or put the components in separate "
    "namespaces or limit an API key's scope"
)


def visibility_warnings(text: str) -> list[tuple[int, str]]:
    """Each line of `text` that calls a session-visibility method, with what to say about it."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = VISIBILITY_CALL.search(line.split("#", 1)[0])
        if match:
            found.append((number, MESSAGE.format(match.group(1))))
    return found
