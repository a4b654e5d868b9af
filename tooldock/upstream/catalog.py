"""The aggregate of every upstream server that is up: prefixed names, first-listed-wins, and activation.

Seed 001 (Toolman): a server's names get its `namespace` and `_` in front (tools, prompts, resource URIs
and URI templates); when two servers produce the same name the first one listed in tools.toml keeps it.
Tools and resources (with templates) are active or not, matched against `active_toolsets` globs at start
and changed by `toolman_activate`; prompts are always available.

An `Activation` holds only what a caller changed (name -> on/off): everything else follows the globs.
So items of a crashed server leave the catalog and come back after a restart with the state they had.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from tooldock.errors import InvalidArguments, NotFound, ToolInactive, ToolNotFound
from tooldock.upstream.connection import Listing

ACTIVATE = "toolman_activate"
DESCRIPTION_CHARS = 132  # seed 001: each catalog entry shows the upstream description cut to this length
Kind = Literal["tool", "resource", "template", "prompt"]


def prefixed(prefix: str, name: str) -> str:
    return f"{prefix}_{name}" if prefix else name


def unprefixed(prefix: str, name: str) -> str | None:
    """The server's own name of a prefixed one, or None when it does not carry that prefix."""
    if not prefix:
        return name
    return name[len(prefix) + 1 :] if name.startswith(prefix + "_") else None


def short(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= DESCRIPTION_CHARS else flat[: DESCRIPTION_CHARS - 1] + "…"


@dataclass(frozen=True)
class Item:
    kind: Kind
    name: str  # as callers see it: prefixed name, URI or URI template
    original: str  # as the server knows it
    server: int  # index of its server in tools.toml
    descriptor: dict[str, Any]  # the server's descriptor with the prefixed name applied


@dataclass
class Activation:
    """One caller's changes to the defaults (the `active_toolsets` globs): name -> active."""

    tools: dict[str, bool] = field(default_factory=dict)
    resources: dict[str, bool] = field(default_factory=dict)


def _close(name: str, candidates: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.5)


class Catalog:
    def __init__(self, servers: Sequence[tuple[str, Listing | None]], globs: Sequence[str]) -> None:
        """`servers`: (prefix, listing) in tools.toml order; a listing of None is a server that is not up."""
        self.globs = tuple(globs)
        self.prefixes = [prefix for prefix, _ in servers]
        self.tools: dict[str, Item] = {}
        self.resources: dict[str, Item] = {}
        self.templates: dict[str, Item] = {}
        self.prompts: dict[str, Item] = {}
        self.collisions: list[str] = []
        for index, (prefix, listing) in enumerate(servers):
            if listing is None:
                continue
            self._add(self.tools, "tool", index, prefix, listing.tools, "name")
            self._add(self.resources, "resource", index, prefix, listing.resources, "uri")
            self._add(self.templates, "template", index, prefix, listing.templates, "uriTemplate")
            self._add(self.prompts, "prompt", index, prefix, listing.prompts, "name")

    def _add(
        self, into: dict[str, Item], kind: Kind, index: int, prefix: str, items: list[dict[str, Any]], key: str
    ) -> None:
        for raw in items:
            original = raw.get(key)
            if not isinstance(original, str) or not original:
                continue
            name = prefixed(prefix, original)
            if name in into:  # seed 001: the first server listed keeps a name; later duplicates are dropped
                self.collisions.append(f"{kind} {name} of server #{index + 1}")
                continue
            into[name] = Item(kind, name, original, index, {**raw, key: name})

    # -- activation -------------------------------------------------------------------------------------

    def default(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, glob) for glob in self.globs)

    def tool_active(self, name: str, activation: Activation | None) -> bool:
        changed = activation.tools.get(name) if activation is not None else None
        return self.default(name) if changed is None else changed

    def resource_active(self, name: str, activation: Activation | None) -> bool:
        changed = activation.resources.get(name) if activation is not None else None
        return self.default(name) if changed is None else changed

    def active_tools(self, activation: Activation | None) -> list[dict[str, Any]]:
        return [i.descriptor for n, i in self.tools.items() if self.tool_active(n, activation)]

    def active_resources(self, activation: Activation | None) -> list[dict[str, Any]]:
        return [i.descriptor for n, i in self.resources.items() if self.resource_active(n, activation)]

    def active_templates(self, activation: Activation | None) -> list[dict[str, Any]]:
        return [i.descriptor for n, i in self.templates.items() if self.resource_active(n, activation)]

    def activate(
        self, activation: Activation, tools_on: list[str], tools_off: list[str], res_on: list[str], res_off: list[str]
    ) -> str:
        """Apply all four lists or none of them (seed 001): every name is checked first."""
        if not (tools_on or tools_off or res_on or res_off):
            raise InvalidArguments(
                f"nothing to change: name at least one tool or resource in tools_on, tools_off, resources_on or "
                f"resources_off (the catalog in {ACTIVATE}'s description lists them; * marks the active ones)"
            )
        resource_names = [*self.resources, *self.templates]
        unknown: dict[str, list[str]] = {}
        for names, known in ((tools_on + tools_off, self.tools), (res_on + res_off, resource_names)):
            for name in names:
                if name not in known:
                    unknown[name] = _close(name, known)
        both = sorted((set(tools_on) & set(tools_off)) | (set(res_on) & set(res_off)))
        if unknown or both:
            parts = [
                f"{name!r} (did you mean {', '.join(map(repr, tips))}?)" if tips else repr(name)
                for name, tips in unknown.items()
            ]
            message = f"unknown name(s): {', '.join(parts)}. " if parts else ""
            if both:
                message += f"turned both on and off: {', '.join(map(repr, both))}. "
            raise InvalidArguments(
                message + "Nothing was changed; use the exact names from the catalog in the tool's description.",
                {"unknown": unknown, "conflicting": both},
            )
        for name in tools_on:
            activation.tools[name] = True
        for name in tools_off:
            activation.tools[name] = False
        for name in res_on:
            activation.resources[name] = True
        for name in res_off:
            activation.resources[name] = False
        counts = [
            f"{label} {len(names)} {kind}{'s' if len(names) != 1 else ''}"
            for label, names, kind in (
                ("activated", tools_on, "tool"),
                ("deactivated", tools_off, "tool"),
                ("activated", res_on, "resource"),
                ("deactivated", res_off, "resource"),
            )
            if names
        ]
        active = len(self.active_tools(activation))
        return f"{'; '.join(counts).capitalize()}. {active} tool(s) now active; tools/list shows their schemas."

    # -- lookups ------------------------------------------------------------------------------------------

    def tool(self, name: str, activation: Activation | None) -> Item:
        item = self.tools.get(name)
        if item is None:
            tips = _close(name, [*self.tools, ACTIVATE])
            hint = f"; similar: {', '.join(tips)}" if tips else f"; the catalog in {ACTIVATE}'s description lists all"
            raise ToolNotFound(f"unknown tool {name!r}{hint}", {"tool": name, "similar": tips})
        if not self.tool_active(name, activation):
            raise ToolInactive(
                f"tool {name!r} is inactive: call {ACTIVATE} with tools_on=[{name!r}] first, then call it",
                {"tool": name},
            )
        return item

    def resource(self, uri: str, activation: Activation | None) -> tuple[int, str]:
        """(server index, upstream URI) of a URI a caller reads: a listed resource or one a template makes."""
        item = self.resources.get(uri)
        if item is None:
            item = self._template_for(uri)
        if item is None:
            tips = _close(uri, [*self.resources, *self.templates])
            hint = f"; similar: {', '.join(tips)}" if tips else ""
            raise NotFound(f"unknown resource {uri!r}{hint}", {"uri": uri, "similar": tips})
        if not self.resource_active(item.name, activation):
            raise ToolInactive(
                f"resource {item.name!r} is inactive: call {ACTIVATE} with resources_on=[{item.name!r}] first",
                {"uri": uri},
            )
        original = unprefixed(self.prefixes[item.server], uri)
        assert original is not None  # listed and template-matched URIs all carry their server's prefix
        return item.server, original

    def _template_for(self, uri: str) -> Item | None:
        for item in self.templates.values():
            original = unprefixed(self.prefixes[item.server], uri)
            if original is None:
                continue
            try:
                template = UriTemplate.parse(item.original)
            except InvalidUriTemplate:
                continue
            if template.match(original) is not None:
                return item
        return None

    def prompt(self, name: str) -> Item:
        item = self.prompts.get(name)
        if item is None:
            tips = _close(name, self.prompts)
            hint = f"; similar: {', '.join(tips)}" if tips else ""
            raise NotFound(f"unknown prompt {name!r}{hint}", {"prompt": name, "similar": tips})
        return item

    # -- the activation tool ----------------------------------------------------------------------------

    def activation_tool(self, activation: Activation | None) -> dict[str, Any]:
        """`toolman_activate`, its description carrying the live catalog (seed 001)."""
        lines = [
            "Turn upstream tools and resources on or off. Only active tools appear in tools/list with their full "
            "schemas; inactive ones are only named below. Give exact names; names you leave out keep their state; "
            "at least one list must be non-empty. Prompts are always available.",
            "",
            "Catalog (* = active):",
        ]

        def section(title: str, items: dict[str, Item], active: Any) -> None:
            if items:
                lines.append(f"{title}:")
                for name, item in items.items():
                    mark = "*" if active(name, activation) else " "
                    text = short(item.descriptor.get("description") or item.descriptor.get("title"))
                    lines.append(f"{mark} {name}" + (f" - {text}" if text else ""))

        section("Tools", self.tools, self.tool_active)
        section("Resources", self.resources, self.resource_active)
        section("Resource templates", self.templates, self.resource_active)
        if not (self.tools or self.resources or self.templates):
            lines.append("(empty: no upstream server is up)")
        names = {"type": "array", "items": {"type": "string"}}
        return {
            "name": ACTIVATE,
            "description": "\n".join(lines),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "tools_on": {**names, "description": "tool names to activate"},
                    "tools_off": {**names, "description": "tool names to deactivate"},
                    "resources_on": {**names, "description": "resource URIs or URI templates to activate"},
                    "resources_off": {**names, "description": "resource URIs or URI templates to deactivate"},
                },
                "required": ["tools_on", "tools_off", "resources_on", "resources_off"],
                "additionalProperties": False,
            },
            "annotations": {"title": "Activate upstream tools", "readOnlyHint": False, "idempotentHint": True},
        }


def catalog_tools(description: str) -> list[tuple[str, bool, str]]:
    """(name, active, description) of each tool in `activation_tool`'s description, as it writes them: the
    catalog an MCP client reads (the manager's `list_tools` reads it so, through the gateway)."""
    found: list[tuple[str, bool, str]] = []
    lines = description.splitlines()
    if "Tools:" not in lines:
        return found
    for line in lines[lines.index("Tools:") + 1 :]:
        if line[:1] not in ("*", " ") or len(line) < 3:
            break  # the next section's title
        name, _, text = line[2:].partition(" - ")
        found.append((name, line[0] == "*", text))
    return found


def names_in(value: Any, field_name: str) -> list[str]:
    """One of toolman_activate's four lists, checked."""
    if value is None:
        raise InvalidArguments(f"{field_name} is required: a list of names (may be empty, [])")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArguments(f'{field_name} must be a list of names, e.g. ["time_get_current_time"]')
    return list(dict.fromkeys(value))
