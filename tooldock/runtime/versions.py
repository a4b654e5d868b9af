"""A FastMCP client's choice of a tool's version (`_meta.fastmcp.version`), on the gateway's MCP paths and
its relay socket (where `tooldock relay` passes it on), and a REST caller's (`?version=`): a version the
tool's listing offers is run (the worker, or an upstream server, picks it), another is refused as an
unknown tool is (-32602; REST's 404), with the versions there are (namespace/versions.py words it)."""

from __future__ import annotations

from typing import Any

from tooldock.errors import ToolNotFound
from tooldock.namespace.versions import CALL_VERSION, FASTMCP_META, asked_version, version_refusal
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


def version_of_tool(engine: Engine, namespace: str | None, tool: str, version: str, key: Any) -> dict[str, Any]:
    """REST's `?version=`: the descriptor of that version of `tool` (its output schema says how its result
    is unwrapped), refused (ToolNotFound) as an MCP call asking for it is when the listing does not offer
    it; the version goes on in CALL_VERSION. Where the worker does not describe its other versions (an
    upstream server's tool), the listed version's descriptor stands in."""
    listed = engine.get_tool(namespace, tool, key=key)
    refusal = version_refusal(tool, {FASTMCP_META: {"version": version}}, listed.get("_meta"))
    if refusal is not None:
        raise ToolNotFound(refusal, {"tool": tool, "version": version})
    CALL_VERSION.set(version)
    others = getattr(engine.namespace(namespace, key).worker, "tool_versions", None)
    found = others.get(tool, {}).get(version) if isinstance(others, dict) else None
    return found if isinstance(found, dict) else listed
