"""Session visibility: what a Context tool's `ctx.disable_components()` / `ctx.enable_components()` /
`ctx.reset_visibility()` hides from the MCP session that called it, and from no other.

FastMCP keeps a session's rules in its state store and filters that session's lists and lookups by them.
Behind ToolDock the gateway keeps them, in the session's `SessionState`: the worker reports a tool's new
rules with what they hide of the namespace (a `visibility` event; worker/visibility.py matches them with
fastmcp's own transforms), and the gateway hands the rules back with every call it sends the worker for
that session, so fastmcp finds the rules where it looks for them. The gateway filters the session's tool,
resource, template and prompt lists and refuses a hidden tool's call as an unknown tool's; fastmcp itself
refuses a hidden resource, template or prompt. A reload can change what the rules hide (a new tool with a
hidden tag): the next list or call of the session asks the worker again (`visibility.hidden`), for at most
ASK_SECONDS: a worker that does not answer in time (its loop blocked by a tool) leaves the last answer in
place, and the session's next list or call asks again.

Only sessions have rules (handshake-era MCP, streamable HTTP or legacy SSE); the lean path hands the
requests of a session that has some to the SDK's path, where these filters run.

A versioned tool is listed with its highest version's schema (namespace/extract.py): when the rules hide
that version but not all, the session's list shows the highest version left, as FastMCP lists it (the
worker describes it), and a call that names no version runs that one; a call asking for a hidden version
is refused as a version the tool does not have.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import mcp_types as types

from tooldock.errors import ToolNotFound
from tooldock.namespace.versions import CALL_VERSION, FASTMCP_META, asked_version
from tooldock.runtime.engine import Engine

# How long a session's list or call waits for its worker to match the rules again after a reload (the
# matching itself takes milliseconds).
ASK_SECONDS = 2.0

# What a tool's new rules tell its session, as fastmcp sends it (a `changed` event: protocol.LIST_CHANGED).
NOTICES: dict[str, types.ServerNotification] = {
    n.method: n
    for n in (
        types.ToolListChangedNotification(),
        types.ResourceListChangedNotification(),
        types.PromptListChangedNotification(),
    )
}
MAX_RULES_BYTES = 256 * 1024  # a session's rules as JSON; a worker that sends more is not believed
# A surface kind (as the gateway lists it) -> the field of `hidden_by`'s answer, and what names an item.
SURFACE = {
    "resources": ("resources", "uri"),
    "resourceTemplates": ("templates", "uriTemplate"),
    "prompts": ("prompts", "name"),
}


def _names(value: Any) -> frozenset[str]:
    return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list) else frozenset()


def _listings(value: Any) -> dict[str, dict[str, Any]]:
    """The tool descriptors a worker sent, by name: those that are valid MCP tools of that name and name
    their version (a worker runs the namespace's code: anything else is left out, the tool listed as before)."""
    found = {}
    for name, descriptor in (value if isinstance(value, dict) else {}).items():
        if not isinstance(descriptor, dict) or descriptor.get("name") != name:
            continue
        if asked_version(descriptor.get("_meta")) is None:
            continue
        try:
            types.Tool.model_validate(descriptor)
        except ValueError:
            continue
        found[name] = descriptor
    return found


class Hidden:
    """What a session's rules hide of its namespace (worker/visibility.py's `hidden_by`, checked here)."""

    __slots__ = ("inlined", "kinds", "listed", "tools", "versions")

    def __init__(self, data: Any) -> None:
        data = data if isinstance(data, dict) else {}
        self.tools = _names(data.get("tools"))
        versions = data.get("versions")
        versions = versions if isinstance(versions, dict) else {}
        self.versions = {str(name): _names(listed) for name, listed in versions.items()}
        self.kinds = {kind: _names(data.get(field)) for kind, (field, _) in SURFACE.items()}
        # A versioned tool whose listed version is hidden, as listed by its highest version left
        self.listed, self.inlined = _listings(data.get("listed")), _listings(data.get("inlined"))

    def hides_tool(self, tool: dict[str, Any]) -> bool:
        """Whether the listed tool is hidden: every version of it, or the one listed with none left."""
        name = tool.get("name")
        if name in self.tools:
            return True
        if name in self.listed:
            return False
        return (asked_version(tool.get("_meta")) or "") in self.versions.get(str(name), frozenset())

    def version_left(self, tool: str, meta: Any) -> str | None:
        """The version a call of `tool` that names none runs, when the one listed is hidden (FastMCP runs the
        highest one left); None: the call runs what it would have run."""
        listed = self.listed.get(tool)
        return asked_version(listed.get("_meta")) if listed is not None and asked_version(meta) is None else None

    def tools_listed(self, tools: list[dict[str, Any]], inline: bool = False) -> list[dict[str, Any]]:
        """`tools` without the hidden ones; a versioned tool's `versions` without its hidden versions, listed
        by its highest version left (its `$ref`s inlined when the gateway lists tools so: `inline`)."""
        shown = []
        for tool in tools:
            if self.hides_tool(tool):
                continue
            name = str(tool.get("name"))
            if name in self.listed:
                tool = (self.inlined.get(name) if inline else None) or self.listed[name]
            hidden = self.versions.get(name)
            meta = tool.get("_meta") or {}
            block = meta.get(FASTMCP_META)
            if hidden and isinstance(block, dict) and isinstance(block.get("versions"), list):
                versions = [v for v in block["versions"] if v not in hidden]
                tool = {**tool, "_meta": {**meta, FASTMCP_META: {**block, "versions": versions}}}
            shown.append(tool)
        return shown

    def surface(self, kind: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A resource, template or prompt list without the hidden ones."""
        hidden, key = self.kinds.get(kind, frozenset()), SURFACE.get(kind, ("", "name"))[1]
        return [item for item in items if item.get(key) not in hidden] if hidden else items

    def refuses_call(self, tool: dict[str, Any], meta: Any) -> bool:
        """Whether a call of the listed `tool` with the call's `_meta` asks for something hidden."""
        if self.hides_tool(tool):
            return True
        asked = asked_version(meta)
        return asked is not None and asked in self.versions.get(str(tool.get("name")), frozenset())


class SessionRules:
    """One session's visibility rules, and what they hide of its namespace as of a registry generation."""

    __slots__ = ("generation", "hidden", "now", "rules")

    def __init__(self, now: Callable[[], int]) -> None:
        self.now = now  # the registry's generation now: what the rules hide is as of one
        self.rules: list[dict[str, Any]] = []
        self.hidden = Hidden(None)
        self.generation = -1

    def keep(self, data: Any) -> None:
        """The rules and what they hide, as a worker reported them (a `visibility` event)."""
        data = data if isinstance(data, dict) else {}
        rules = data.get("rules")
        rules = [rule for rule in rules if isinstance(rule, dict)] if isinstance(rules, list) else []
        if len(json.dumps(rules, default=str)) > MAX_RULES_BYTES:
            raise ValueError(f"a session's visibility rules are limited to {MAX_RULES_BYTES} bytes")
        self.rules, self.hidden, self.generation = rules, Hidden(data.get("hidden")), self.now()

    def fields(self) -> dict[str, Any]:
        """What a request to the worker carries for this session: its rules, when it has any."""
        return {"visibility": self.rules} if self.rules else {}


async def hidden_for(rules: SessionRules, namespace: str, engine: Engine) -> Hidden | None:
    """What the session's rules hide of the namespace as it is now (None: the session has no rules). After a
    reload the worker matches them again; a worker that cannot answer, or not within ASK_SECONDS, leaves the
    last answer in place until the next ask."""
    if not rules.rules:
        return None
    generation = rules.now()
    if rules.generation != generation:
        entry = engine.registry.snapshot.entries.get(namespace)
        worker = entry.worker if entry is not None else None
        if worker is not None:
            try:
                async with asyncio.timeout(ASK_SECONDS):
                    answer = await worker.request("visibility.hidden", visibility=rules.rules)
            except Exception:  # a worker that is down or stuck: its last answer stands until it answers
                return rules.hidden
            rules.hidden, rules.generation = Hidden(answer), generation
    return rules.hidden


async def check_visible(
    rules: SessionRules | None, namespace: str, engine: Engine, name: str, meta: Any, session: Any, key: Any
) -> None:
    """Refuse a call of a tool, or of a version, the session's rules hide, as one the namespace does not have
    (ToolNotFound, worded as `Engine.get_tool` words it): the session cannot tell them apart."""
    hidden = await hidden_for(rules, namespace, engine) if rules is not None else None
    if hidden is None:
        return
    tool = engine.get_tool(namespace, name, session, key)  # an unknown tool is refused there, as ever
    if not hidden.refuses_call(tool, meta):
        if (left := hidden.version_left(name, meta)) is not None:
            CALL_VERSION.set(left)  # the worker runs that version (runtime/versions.py sets the asked one)
        return
    if not hidden.hides_tool(tool):
        raise ToolNotFound(f"tool {name!r} has no version {asked_version(meta)!r} here", {"tool": name})
    shown = hidden.tools_listed(engine.list_tools(namespace, session, key))
    available = ", ".join(sorted(str(t.get("name")) for t in shown)) or "none"
    raise ToolNotFound(
        f"no tool named {name!r} in namespace {namespace!r}; available: {available}",
        {"namespace": namespace, "tool": name},
    )
