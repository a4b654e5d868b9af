"""A FastMCP client's choice of a tool's version (`_meta.fastmcp.version`), on the gateway's MCP paths and
its relay socket (where `tooldock relay` passes it on): a version the tool's listing offers is run (the
worker, or an upstream server, picks it), another is refused as an unknown tool is (-32602), with the
versions there are (namespace/versions.py words it)."""

from __future__ import annotations

from typing import Any

from tooldock.errors import ToolNotFound
from tooldock.namespace.versions import CALL_VERSION, asked_version, version_refusal
from tooldock.runtime.engine import Engine


def check_version(engine: Engine, namespace: str | None, tool: str, meta: Any, session: Any, key: Any) -> None:
    """Refuse (ToolNotFound) a call of `tool` whose `_meta` asks for a version the tool's listing does not
    offer (`_meta.fastmcp.version` and `versions`); a call that names no version, or one offered, goes on,
    its version in CALL_VERSION for the worker or upstream server that runs it. A tool the caller cannot
    reach is the engine's to say."""
    asked = asked_version(meta)
    CALL_VERSION.set(asked)
    if asked is None:
        return
    refusal = version_refusal(tool, meta, engine.get_tool(namespace, tool, session, key).get("_meta"))
    if refusal is not None:
        raise ToolNotFound(refusal)
