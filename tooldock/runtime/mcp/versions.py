"""A FastMCP client's choice of a tool's version: `Client.call_tool(..., version="1")` sends it as
`_meta.fastmcp.version` (fastmcp's `extract_version_spec` reads it the same way: a string, or nothing).

A namespace serves only the highest version of a tool (namespace/extract.py), and lists it as FastMCP does,
`_meta.fastmcp.version`. A call that asks for another version is refused here, as an unknown tool is
(-32602), with the version that is served: FastMCP would run the version asked for, and running the highest
in its place would answer with another tool's behaviour, unsaid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tooldock.errors import ToolNotFound
from tooldock.runtime.engine import Engine

FASTMCP = "fastmcp"  # fastmcp's key in `_meta` (namespace.extract.FASTMCP_META)


def asked_version(meta: Any) -> str | None:
    """The version a call's `_meta` asks for, if any."""
    block = meta.get(FASTMCP) if isinstance(meta, Mapping) else None
    version = block.get("version") if isinstance(block, Mapping) else None
    return version if isinstance(version, str) else None


def served_version(descriptor: Mapping[str, Any]) -> str | None:
    """The version of a tool the namespace serves (as listed), None for a tool without versions."""
    return asked_version(descriptor.get("_meta"))


def check_version(engine: Engine, namespace: str | None, tool: str, meta: Any, session: Any, key: Any) -> None:
    """Refuse a call that asks for a version of `tool` other than the one served (ToolNotFound); a call that
    names no version, or the one served, goes on. A tool the caller cannot reach is the engine's to say."""
    asked = asked_version(meta)
    if asked is None:
        return
    served = served_version(engine.get_tool(namespace, tool, session, key))
    if asked == served:
        return
    if served is None:
        raise ToolNotFound(f"tool {tool!r} has no versions here, so no version {asked!r}: call it without one")
    raise ToolNotFound(
        f"tool {tool!r} has no version {asked!r} here: only its highest version, {served!r}, is served; "
        "call it without a version, or with that one"
    )
