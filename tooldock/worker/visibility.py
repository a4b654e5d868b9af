"""Session visibility (`ctx.enable_components()`, `ctx.disable_components()`, `ctx.reset_visibility()`)
behind the gateway: the rules are the session's, kept by the gateway; the worker applies them.

FastMCP keeps a session's visibility rules in its state store and filters that session's lists and calls
by them. Behind ToolDock the lists are the gateway's and plain tools never reach the worker's FastMCP
server, so the gateway keeps each MCP session's rules (runtime/mcp/visibility.py) and hands them to the
worker with every call it makes for that session (the worker protocol's `visibility`). Here the server's
state store answers fastmcp's reads of the rules key with the call's rules and turns its writes into a
`visibility` event to the gateway: the new rules, with what they hide (`hidden_by`, fastmcp's own
transforms applied to the namespace's components). So a resource, template or prompt the session hid is
not found by fastmcp itself, and the gateway filters its lists and refuses hidden tools. Kept by the
gateway, the rules outlive a worker restart or a reload, as the session does.

A call without a session (2026-07-28, REST, the relay socket) has nothing to key rules to: a write fails,
as FastMCP refuses it for an unauthenticated 2026-07-28 request. Everything else in the state store passes
through (to sessionvalues.py, which keeps a session's `ctx.set_state()` values with the gateway).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, SupportsFloat

from key_value.aio.protocols.key_value import AsyncKeyValue

from tooldock.worker.callstore import CALL, PerKey

if TYPE_CHECKING:
    from tooldock.namespace.extract import LoadedNamespace

RULES_SUFFIX = ":_visibility_rules"  # fastmcp's key for a session's rules (transforms/visibility.py)
MAX_RULES = 200  # more than any tool needs; a tool that adds a rule at every call is stopped here
# FastMCP's refusal for a request with no session (transforms/visibility.py), in ToolDock's terms.
NO_SESSION = (
    "Session visibility rules are scoped to a client, and this request has no session to keep them for: "
    "REST calls, the relay socket and MCP 2026-07-28 requests have none. Call the tool from an MCP client on "
    "a session (protocol 2025-11-25 or older) to hide or show components for that session"
)


class SessionRules(PerKey):
    """The worker server's state store: `store`, but the visibility rules are the calling session's, from
    the gateway and back to it. `loaded`: the namespace whose components the rules are matched against."""

    def __init__(self, store: AsyncKeyValue) -> None:
        self.key_value = store
        self.loaded: LoadedNamespace | None = None
        super().__init__()

    async def get(self, key: str, *, collection: str | None = None) -> dict[str, Any] | None:
        if not key.endswith(RULES_SUFFIX):
            return await self.key_value.get(key=key, collection=collection)
        call = CALL.get()
        rules = call.visibility if call is not None else []
        return {"value": list(rules)} if rules else None

    async def put(
        self, key: str, value: Mapping[str, Any], *, collection: str | None = None, ttl: SupportsFloat | None = None
    ) -> None:
        if key.endswith(RULES_SUFFIX):
            await self._keep(value)
            return
        await self.key_value.put(key=key, value=value, collection=collection, ttl=ttl)

    async def _keep(self, value: Mapping[str, Any]) -> None:
        """The session's new rules: the call's from now on, and the gateway's."""
        call = CALL.get()
        if call is None or call.scope is None:
            raise RuntimeError(NO_SESSION)
        rules = list(value.get("value") or [])
        if len(rules) > MAX_RULES:
            raise RuntimeError(
                f"a session holds at most {MAX_RULES} visibility rules; call ctx.reset_visibility() and "
                "set the ones needed again"
            )
        call.visibility = rules
        hidden = await hidden_by(self.loaded, rules) if self.loaded is not None else {}
        await call.event("visibility", {"rules": rules, "hidden": hidden})


async def hidden_by(loaded: LoadedNamespace, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """What `rules` hide of the namespace, by fastmcp's own transforms (later rules win): the names of the
    tools whose every version is hidden, the hidden versions of the others, and the URIs, URI templates and
    names of the hidden resources, templates and prompts. A versioned tool whose listed (highest) version is
    hidden, but not every version, is listed as FastMCP lists it then: its highest version left (`listed`,
    and `inlined` where its schemas have `$ref`s to inline)."""
    from fastmcp.server.transforms.visibility import create_visibility_transforms, is_enabled

    transforms = create_visibility_transforms(rules)

    async def off(kind: str, components: list[Any]) -> list[Any]:
        for transform in transforms:
            components = list(await getattr(transform, f"list_{kind}")(components))
        return [c for c in components if not is_enabled(c)]

    every = [t for name, tool in loaded.tools.items() for t in (loaded.versions.get(name) or {"": tool}).values()]
    hidden_tools: dict[str, set[str]] = {}
    for tool in await off("tools", every):
        hidden_tools.setdefault(tool.name, set()).add(str(tool.version) if tool.version is not None else "")
    tools, versions, listed = [], {}, {}
    for name, hidden in hidden_tools.items():
        all_versions = loaded.versions.get(name)
        if not all_versions or hidden >= set(all_versions):
            tools.append(name)
            continue
        versions[name] = sorted(hidden)
        if str(loaded.tools[name].version) in hidden:
            listed[name] = [tool for version, tool in all_versions.items() if version not in hidden]
    return {
        "tools": sorted(tools),
        "versions": versions,
        **_listings(listed),
        "resources": sorted(str(r.uri) for r in await off("resources", list(loaded.resources.values()))),
        "templates": sorted(t.uri_template for t in await off("resource_templates", list(loaded.templates.values()))),
        "prompts": sorted(p.name for p in await off("prompts", list(loaded.prompts.values()))),
    }


def _listings(left: dict[str, list[Any]]) -> dict[str, Any]:
    """How each tool is listed by its versions left: the highest one's descriptor, naming them all, highest
    first (`_meta.fastmcp.versions`, as FastMCP lists them), and its copy with `$ref`s inlined if it has any."""
    from fastmcp.utilities.versions import version_sort_key

    from tooldock.namespace.extract import describe, inlined
    from tooldock.namespace.versions import FASTMCP_META

    listed, inlined_ = {}, {}
    for name, tools in left.items():
        ordered = sorted(tools, key=version_sort_key, reverse=True)
        descriptor = describe(ordered[0])
        block = descriptor.setdefault("_meta", {}).setdefault(FASTMCP_META, {})
        block["versions"] = [str(tool.version) for tool in ordered]
        listed[name] = descriptor
        if (copy := inlined(descriptor)) is not None:
            inlined_[name] = copy
    return {"listed": listed, "inlined": inlined_} if listed else {}
