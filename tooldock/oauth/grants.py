"""What an OAuth access token may do: its scopes (or another claim's values, such as groups or roles) mapped onto
ToolDock's own scopes, read / write / admin narrowed by namespace and tool globs, exactly as API keys are.

A token's principal is a `TokenPrincipal`: an `ApiKey` (so every scope check the front ends and the engine
make for keys applies unchanged) that also carries the token's subject, client id and issuer, never the
token. The grants are tried in order and the first one the token holds wins (list the broadest first):

    tooldock:admin -> admin      the defaults (TOOLDOCK_OAUTH_SCOPES renames them)
    tooldock:write -> write
    tooldock:read  -> read

A grants file (TOOLDOCK_OAUTH_GRANTS_FILE) replaces them: which claim to match, and per value a scope and
globs. See docs/howto/oauth.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from tooldock.errors import InsufficientScope, KeysError, NotInScope, OAuthConfigError
from tooldock.keys import SCOPES, ApiKey
from tooldock.keys.validate import check_namespace_glob, check_scope, check_tool_glob
from tooldock.oauth.metadata import challenge

DEFAULT_SCOPES = {"admin": "tooldock:admin", "write": "tooldock:write", "read": "tooldock:read"}
RANK = {"read": 0, "write": 1, "admin": 2}
MAX_GRANTS_FILE = 256 * 1024


@dataclass(frozen=True)
class Grant:
    value: str  # the claim value (a scope, a group, a role) that grants this
    scope: str  # read | write | admin
    namespaces: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()


@dataclass(frozen=True)
class TokenPrincipal(ApiKey):
    """An access token's caller, as the gateway's scope checks know a caller. `id` is a digest of the issuer
    and subject (stable across tokens, so an MCP session stays with its subject); `name` says who it is."""

    subject: str = ""
    client_id: str = ""
    issuer: str = ""
    needs: tuple[tuple[str, Grant], ...] = ()  # (claim, grant) of every grant, for the insufficient_scope hint
    resource: str = ""  # the resource the token was checked for (its 403s point at that resource's metadata)
    audience_namespace: str = ""  # the one namespace the token's audience names (no scope widens that)
    in_keys_file: ClassVar[bool] = False

    def who(self) -> str:
        return f"OAuth token of {self.subject!r} (client {self.client_id!r}, scope {self.scope})"

    def audit_fields(self) -> dict[str, str]:
        return {"key_id": self.id, "subject": self.subject, "client_id": self.client_id}

    def refusal(self, namespace: str, descriptor: dict[str, Any]) -> NotInScope:
        """Why a tool is refused, with the scope that would allow it when one would (the 403's `scope`)."""
        details: dict[str, Any] = {"namespace": namespace, "key_id": self.id}
        if descriptor.get("name") is not None:
            details["tool"] = descriptor.get("name")
        if self.audience_namespace and namespace != self.audience_namespace:
            return NotInScope(self.why_not(namespace, descriptor), details)
        for claim, grant in sorted(self.needs, key=lambda cg: RANK[cg[1].scope]):
            if claim == "scope" and _as_key(self, grant).allows_tool(namespace, descriptor):
                why = self.why_not(namespace, descriptor)
                hint = challenge(self.resource, "insufficient_scope", why, grant.value) if self.resource else None
                return InsufficientScope(why, {**details, "scope": grant.value}, hint)
        return NotInScope(self.why_not(namespace, descriptor), details)


def _as_key(principal: TokenPrincipal, grant: Grant) -> ApiKey:
    return ApiKey(principal.id, principal.name, check_scope(grant.scope), grant.namespaces, grant.tools)


def default_grants(names: dict[str, str] | None = None) -> tuple[Grant, ...]:
    names = {**DEFAULT_SCOPES, **(names or {})}
    return tuple(Grant(names[s], s) for s in ("admin", "write", "read"))


def parse_scope_names(raw: str) -> dict[str, str]:
    """TOOLDOCK_OAUTH_SCOPES: `read=api://tooldock/read,write=...`: the token scope each of ours is called."""
    names: dict[str, str] = {}
    for part in raw.split(","):
        if not part.strip():
            continue
        ours, sep, theirs = part.partition("=")
        if not sep or ours.strip() not in SCOPES or not theirs.strip() or " " in theirs.strip():
            raise OAuthConfigError(
                f"TOOLDOCK_OAUTH_SCOPES: {part.strip()[:80]!r} is not <read|write|admin>=<scope>; "
                "e.g. TOOLDOCK_OAUTH_SCOPES=read=tooldock:read,write=tooldock:write,admin=tooldock:admin"
            )
        names[ours.strip()] = theirs.strip()
    return names


def load_grants_file(path: Path) -> tuple[str, tuple[Grant, ...]]:
    """A grants file: `claim` (default `scope`) and `grants`, a list of {value, scope, namespaces?, tools?}."""
    where = f"TOOLDOCK_OAUTH_GRANTS_FILE ({path})"
    try:
        text = path.read_bytes()[: MAX_GRANTS_FILE + 1]
        data = yaml.safe_load(text.decode("utf-8")) if len(text) <= MAX_GRANTS_FILE else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise OAuthConfigError(f"{where}: cannot read it: {str(exc)[:200]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("grants"), list) or not data["grants"]:
        raise OAuthConfigError(f"{where}: expected a YAML mapping with a non-empty `grants:` list (under 256 KB)")
    claim = data.get("claim", "scope")
    if not isinstance(claim, str) or not claim or len(claim) > 100:
        raise OAuthConfigError(f"{where}: `claim` must be a claim name, e.g. scope, groups or roles")
    grants = []
    for n, item in enumerate(data["grants"], 1):
        try:
            if not isinstance(item, dict) or set(item) - {"value", "scope", "namespaces", "tools"}:
                raise KeysError("each grant is a mapping of value, scope, and optionally namespaces and tools")
            value = item.get("value")
            if not isinstance(value, str) or not value.strip():
                raise KeysError("`value` must be the claim value (a scope, group or role name)")
            globs = {k: item.get(k) or [] for k in ("namespaces", "tools")}
            if not all(isinstance(v, list) and all(isinstance(g, str) for g in v) for v in globs.values()):
                raise KeysError("`namespaces` and `tools` are lists of globs")
            grants.append(
                Grant(
                    value.strip(),
                    check_scope(str(item.get("scope", ""))),
                    tuple(check_namespace_glob(g) for g in globs["namespaces"]),
                    tuple(check_tool_glob(g) for g in globs["tools"]),
                )
            )
        except KeysError as exc:
            raise OAuthConfigError(f"{where}: grant {n}: {exc}") from None
    return claim, tuple(grants)


def claim_values(claims: dict[str, Any], claim: str) -> set[str]:
    """The values a token holds in `claim`: `scope` is a space-separated string (RFC 9068), or Entra's `scp`
    (space-separated) and `roles`; any other claim a string or a list of strings."""
    if claim == "scope":
        found: set[str] = set()
        for name in ("scope", "scp"):
            raw = claims.get(name)
            found |= set(raw.split()) if isinstance(raw, str) else {v for v in raw or () if isinstance(v, str)}
        roles = claims.get("roles")  # Entra ID: application permissions of a client-credentials token
        return found | ({r for r in roles if isinstance(r, str)} if isinstance(roles, list) else set())
    raw = claims.get(claim)
    if isinstance(raw, str):
        return {raw}
    return {v for v in raw if isinstance(v, str)} if isinstance(raw, list) else set()


def principal_for(
    claims: dict[str, Any],
    claim: str,
    grants: tuple[Grant, ...],
    namespace: str | None,
    expires: Any,
    resource: str = "",
) -> TokenPrincipal:
    """The principal of a verified token's `claims`; InsufficientScope when it holds none of the grants.
    `namespace`: the token's audience is one namespace's MCP endpoint, to which it is then narrowed."""
    issuer, subject = str(claims.get("iss", "")), str(claims.get("sub") or "")
    client = str(claims.get("client_id") or claims.get("azp") or claims.get("appid") or "")
    subject = subject or client
    held = claim_values(claims, claim)
    needs = tuple((claim, g) for g in grants)
    for grant in grants:
        if grant.value in held:
            break
    else:
        wanted = " ".join(g.value for g in grants if g.scope == "read") or grants[-1].value
        why = (
            f"the token of {subject[:200]!r} holds none of the {claim} values ToolDock maps "
            f"({', '.join(g.value for g in grants)[:400]})"
        )
        scoped = claim == "scope"
        hint = challenge(resource, "insufficient_scope", why, wanted if scoped else None) if resource else None
        raise InsufficientScope(why, {"scope": wanted} if scoped else {}, hint)
    namespaces = grant.namespaces
    if namespace is not None:
        if namespaces and not ApiKey("", "", "read", namespaces).allows_namespace(namespace):
            why = f"the token's grant {grant.value!r} does not cover namespace {namespace!r}"
            raise InsufficientScope(why, {}, challenge(resource, "insufficient_scope", why) if resource else None)
        namespaces = (namespace,)
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:12]
    return TokenPrincipal(
        id=f"oauth-{digest}",
        name=f"sub={subject[:200]} client={client[:200]}",
        scope=check_scope(grant.scope),
        namespaces=namespaces,
        tools=grant.tools,
        expires=expires,
        subject=subject[:200],
        client_id=client[:200],
        issuer=issuer,
        needs=needs,
        resource=resource,
        audience_namespace=namespace or "",
    )
