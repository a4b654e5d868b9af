"""An API key as the gateway sees it (never the key itself: its id, name, scope and globs), and the scope
rules every front end applies through the engine:

    admin   every tool of every namespace, and the manager (an admin key narrowed by globs is not let into
            the manager, which can write any namespace)
    write   every tool of the namespaces it covers
    read    only the tools whose MCP annotations say `readOnlyHint: true`

`--namespace` globs narrow the namespaces of any scope; `--tool` globs narrow the tools: a glob with a `/`
is matched against `<namespace>/<tool>`, one without against the tool's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Literal

from tooldock.errors import NotInScope

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    scope: Scope
    namespaces: tuple[str, ...] = ()  # globs; empty: every namespace
    tools: tuple[str, ...] = ()  # globs; empty: every tool the scope allows
    created: datetime | None = None
    expires: datetime | None = None
    last_used: datetime | None = None
    revoked: datetime | None = None
    rate: float | None = None  # calls per second this key may make (token bucket); None = unlimited
    # False for what is not a key of the keys file (an OAuth token's principal, tooldock.oauth): the KeyGuard
    # ends what such a principal holds at its `expires`, never because the keys file changed.
    in_keys_file: ClassVar[bool] = True

    def who(self) -> str:
        """The caller in an error message or log line: the key's id and name, never the key."""
        return f"API key {self.id} ({self.name!r}, scope {self.scope})"

    def audit_fields(self) -> dict[str, str]:
        """What the audit log records of the caller."""
        return {"key_id": self.id}

    @property
    def unrestricted(self) -> bool:
        """An admin key with no globs: what the bearer token may do, the manager included."""
        return self.scope == "admin" and not self.namespaces and not self.tools

    def state(self, now: datetime) -> str:
        if self.revoked is not None:
            return "revoked"
        if self.expires is not None and now >= self.expires:
            return "expired"
        return "active"

    def allows_namespace(self, namespace: str) -> bool:
        return not self.namespaces or any(fnmatchcase(namespace, glob) for glob in self.namespaces)

    def allows_tool(self, namespace: str, descriptor: dict[str, Any]) -> bool:
        if not self.allows_namespace(namespace):
            return False
        name = str(descriptor.get("name"))
        if self.tools and not any(_tool_matches(glob, namespace, name) for glob in self.tools):
            return False
        if self.scope == "read":
            return read_only(descriptor)
        return True

    def visible(self, namespace: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [tool for tool in tools if self.allows_tool(namespace, tool)]

    def why_not(self, namespace: str, descriptor: dict[str, Any]) -> str:
        """Why a tool is refused, in words a user can act on (no key material: the id and name only)."""
        who = self.who()
        tool = f"{namespace}/{descriptor.get('name')}"
        if not self.allows_namespace(namespace):
            return f"{who} does not cover namespace {namespace!r} (it covers {', '.join(self.namespaces)})"
        if self.tools and not any(_tool_matches(g, namespace, str(descriptor.get("name"))) for g in self.tools):
            return f"{who} does not cover tool {tool} (its tool globs: {', '.join(self.tools)})"
        return f"{who} may call only read-only tools (annotated readOnlyHint: true); {tool} is not one"

    def refusal(self, namespace: str, descriptor: dict[str, Any]) -> NotInScope:
        """The error a front end answers when this key may not use the namespace (`descriptor` empty) or tool."""
        details: dict[str, Any] = {"namespace": namespace, "key_id": self.id}
        if descriptor.get("name") is not None:
            details = {"namespace": namespace, "tool": descriptor["name"], "key_id": self.id}
        return NotInScope(self.why_not(namespace, descriptor), details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "scope": self.scope,
            "namespaces": list(self.namespaces),
            "tools": list(self.tools),
            "created": _iso(self.created),
            "expires": _iso(self.expires),
            "last_used": _iso(self.last_used),
            "revoked": _iso(self.revoked),
            "rate": self.rate,
        }


def read_only(descriptor: dict[str, Any]) -> bool:
    annotations = descriptor.get("annotations")
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


def _tool_matches(glob: str, namespace: str, tool: str) -> bool:
    return fnmatchcase(f"{namespace}/{tool}", glob) if "/" in glob else fnmatchcase(tool, glob)


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when is not None else None
