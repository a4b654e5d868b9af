"""Versions of a tool as MCP carries them: fastmcp's block in `_meta`, `{"fastmcp": {"version": "2"}}`.

A tool's listing says the version listed (the highest, as FastMCP lists it) and, when it has more than one,
all of them (`versions`, highest first: namespace/extract.py lists a file's, an upstream FastMCP server its
own). FastMCP's client asks for one with `call_tool(..., version="1")`, sent as the call's
`_meta.fastmcp.version` (fastmcp's `extract_version_spec` reads only a string there). Plain data, so the
gateway (runtime/versions.py) and `tooldock relay` (cli/relayclient.py) refuse a version the listing does
not offer in the same words; one it offers goes on to the worker or upstream server in `CALL_VERSION`.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

FASTMCP_META = "fastmcp"  # fastmcp's key in a component's `_meta`: its tags and version, and its own bookkeeping
# The version the call being served asked for and may have (runtime/versions.py sets it for each call it
# checks): the worker client sends it on to the worker (runtime/workerclient.py), an upstream namespace to its
# server (upstream/worker.py).
CALL_VERSION: ContextVar[str | None] = ContextVar("tooldock_call_version", default=None)


def asked_version(meta: Any) -> str | None:
    """The version a `_meta` names (a call's: the one asked for; a listed tool's: the one served), if any."""
    block = meta.get(FASTMCP_META) if isinstance(meta, Mapping) else None
    version = block.get("version") if isinstance(block, Mapping) else None
    return version if isinstance(version, str) else None


def listed_versions(meta: Any) -> list[str]:
    """The versions a listed tool's `_meta` says can be called (`versions`, listed when it has several: by
    namespace/extract.py for a file's tool, by an upstream FastMCP server for its own)."""
    block = meta.get(FASTMCP_META) if isinstance(meta, Mapping) else None
    versions = block.get("versions") if isinstance(block, Mapping) else None
    return [v for v in versions if isinstance(v, str)] if isinstance(versions, list) else []


def version_refusal(tool: str, call_meta: Any, listed_meta: Any) -> str | None:
    """Why a call of `tool` whose `_meta` is `call_meta` cannot be served by the tool listed with
    `listed_meta`; None when it names no version, the one listed, or one of the `versions` listed."""
    asked, served = asked_version(call_meta), asked_version(listed_meta)
    offered = listed_versions(listed_meta)
    if asked is None or asked == served or asked in offered:
        return None
    if len(offered) > 1:
        return (
            f"tool {tool!r} has no version {asked!r} here: its versions are {', '.join(map(repr, offered))}; "
            "call it without a version (the highest), or with one of them"
        )
    if served is None:
        return f"tool {tool!r} has no versions here, so no version {asked!r}: call it without one"
    return (
        f"tool {tool!r} has no version {asked!r} here: only its highest version, {served!r}, is served; "
        "call it without a version, or with that one"
    )
