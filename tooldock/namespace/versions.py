"""Versions of a tool as MCP carries them: fastmcp's block in `_meta`, `{"fastmcp": {"version": "2"}}`.

A tool's listing says the version served there (namespace/extract.py lists only the highest of a tool's
versions, as FastMCP lists it); FastMCP's client asks for a version the same way, `call_tool(...,
version="1")` sent as the call's `_meta.fastmcp.version` (fastmcp's `extract_version_spec` reads only a
string there). Plain data, so the gateway's MCP paths (runtime/mcp/versions.py) and `tooldock relay`
(cli/relayclient.py) refuse a version that is not served in the same words: FastMCP would run the version
asked for, and running the highest in its place would answer with another tool's behaviour, unsaid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FASTMCP_META = "fastmcp"  # fastmcp's key in a component's `_meta`: its tags and version, and its own bookkeeping


def asked_version(meta: Any) -> str | None:
    """The version a `_meta` names (a call's: the one asked for; a listed tool's: the one served), if any."""
    block = meta.get(FASTMCP_META) if isinstance(meta, Mapping) else None
    version = block.get("version") if isinstance(block, Mapping) else None
    return version if isinstance(version, str) else None


def version_refusal(tool: str, call_meta: Any, listed_meta: Any) -> str | None:
    """Why a call of `tool` whose `_meta` is `call_meta` cannot be served by the tool listed with
    `listed_meta`; None when it names no version, or the one served."""
    asked, served = asked_version(call_meta), asked_version(listed_meta)
    if asked is None or asked == served:
        return None
    if served is None:
        return f"tool {tool!r} has no versions here, so no version {asked!r}: call it without one"
    return (
        f"tool {tool!r} has no version {asked!r} here: only its highest version, {served!r}, is served; "
        "call it without a version, or with that one"
    )
