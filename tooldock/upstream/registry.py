"""A client for the official MCP Registry (https://registry.modelcontextprotocol.io), and the step from one of
its `server.json` entries to the `UpstreamServer` that runs it.

    client = RegistryClient()                        # MCP_REGISTRY_URL, else the official registry
    hits = await client.search("time")               # [{name, title, description, version, package,
                                                     #   package_type, source_url, status, packages, remotes}]
    entry = await client.get("io.github.x/time")     # {"server": {...server.json...}, "_meta": {...}}
    spec = to_upstream(entry, "time")                # UpstreamServer(command="uvx mcp-server-time==1.0", ...)
    needs = requirements(entry)                      # {name, version, kind, runtime, secrets, missing}

The registry API serves the same handlers under /v0 and /v0.1; v0.1 is the stable one, so it is the default:
`GET /v0.1/servers?search=&limit=&cursor=&version=latest` -> `{"servers": [{"server", "_meta"}], "metadata":
{"nextCursor", "count"}}`; `GET /v0.1/servers/{url-encoded name}/versions/{version|latest}` -> `{"server",
"_meta"}`, or 404. Any failure is a `RegistryError` naming the URL; bad input is an `InvalidQuery` (a
`RegistryError` too), raised before anything is sent.

`to_upstream` runs the first stdio npm package (`npx -y <id>@<version>`) or PyPI package (`uvx
<id>==<version>`), else the first streamable-http or sse remote; oci packages are refused. Environment
variables and headers marked `isSecret` become `${secret:NAME}` references, others with a value or default
become literals, and required ones with neither are left out: `requirements` lists them ("missing") and the
secrets to set. A secret never goes on a command line: an argument that needs one is left out and listed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from tooldock.errors import RegistryError
from tooldock.namespace.toolsfile import ENV_NAME_RE, HEADER_NAME_RE, PREFIX_RE, SECRET_REF_RE, UpstreamServer

DEFAULT_REGISTRY_URL = "https://registry.modelcontextprotocol.io"
API_VERSION = "v0.1"
DEFAULT_TIMEOUT = 10.0
MAX_RESPONSE_BYTES = 5 * 1024 * 1024
MAX_QUERY_CHARS = 200
MAX_PAGES = 10  # search follows at most this many cursors to fill `limit`
HINT = f"check MCP_REGISTRY_URL (unset, it is {DEFAULT_REGISTRY_URL})"
RUNTIMES = {"npm": "npx", "pypi": "uvx"}
NAME_RE = re.compile(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+")  # the registry's own pattern for server names
PACKAGE_RE = re.compile(r"[A-Za-z0-9@][A-Za-z0-9@/._~-]*")
VARIABLE_RE = re.compile(r"\{([A-Za-z0-9_.-]+)\}")
INPUT_KEYS = ("type", "name", "valueHint", "description", "isRequired", "isSecret", "value", "default", "variables")


class InvalidQuery(RegistryError):
    """Bad input to this module (a query, limit, server name, version or prefix)."""


def _check_url(raw: str, what: str) -> str:
    try:
        parts = urlsplit(raw)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        raise RegistryError(f"{what} is not a valid URL") from None
    if parts.username is not None or parts.password is not None:
        raise RegistryError(f"{what} must not hold credentials (user:password@)")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RegistryError(f"{what} must be an http:// or https:// URL such as {DEFAULT_REGISTRY_URL}, got {raw!r}")
    if parts.query or parts.fragment:
        raise RegistryError(f"{what} must be a base URL, without ?query or #fragment, got {raw!r}")
    return raw.rstrip("/")


def registry_url(env: Mapping[str, str] = os.environ) -> str:
    """The registry's base URL: `MCP_REGISTRY_URL` (http/https, no credentials) or the official registry."""
    raw = env.get("MCP_REGISTRY_URL", "").strip()
    return _check_url(raw, "MCP_REGISTRY_URL") if raw else DEFAULT_REGISTRY_URL


class RegistryClient:
    """Reads the MCP Registry. Each call opens and closes its own connection: there is nothing to close."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = MAX_RESPONSE_BYTES,
        api_version: str = API_VERSION,  # "v0" for a registry that serves only the development API
    ) -> None:
        self.base_url = _check_url(base_url, "the registry URL") if base_url else registry_url()
        self.timeout, self.max_bytes, self.api_version = timeout, max_bytes, api_version

    async def search(self, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Up to `limit` (1..100) servers whose name or description holds `query`, latest versions only."""
        if not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY_CHARS or not query.isprintable():
            raise InvalidQuery(f"the search query must be 1 to {MAX_QUERY_CHARS} characters, e.g. 'github'")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise InvalidQuery(f"limit must be a whole number from 1 to 100, got {limit!r}")
        found: dict[str, dict[str, Any]] = {}
        params: dict[str, Any] = {"search": query.strip(), "limit": limit, "version": "latest"}
        async with self._http() as http:
            for _ in range(MAX_PAGES):
                body, url = await self._get_json(http, "/servers", params)
                items, meta = (body.get("servers"), body.get("metadata") or {}) if isinstance(body, dict) else ("", "")
                if not isinstance(items, list) or not isinstance(meta, dict):
                    raise RegistryError(f"{url} answered JSON without a 'servers' list; {HINT}")
                for i, item in enumerate(items):
                    server, extra = _unwrap(item, f"servers[{i}] from {url}")
                    if server["name"] not in found or _official(extra).get("isLatest") is True:
                        found[server["name"]] = _summary(server, extra)
                cursor = meta.get("nextCursor")
                if len(found) >= limit or not items or not isinstance(cursor, str) or not cursor:
                    break
                params["cursor"] = cursor
        return list(found.values())[:limit]

    async def get(self, name: str, version: str = "latest") -> dict[str, Any]:
        """One server's entry, `{"server": server.json, "_meta": registry metadata}`."""
        if not isinstance(name, str) or len(name) > MAX_QUERY_CHARS or not NAME_RE.fullmatch(name):
            raise InvalidQuery(f"{name!r} is not a registry server name like 'io.github.owner/server'; search for it")
        if not isinstance(version, str) or not version or len(version) > 255 or not version.isprintable():
            raise InvalidQuery(f"version must be 'latest' or an exact version like '1.2.3', got {version!r}")
        path = f"/servers/{quote(name, safe='')}/versions/{quote(version, safe='')}"
        which = name if version == "latest" else f"{name} version {version}"
        async with self._http() as http:
            body, url = await self._get_json(http, path, {}, missing=which)
        server, extra = _unwrap(body, f"the answer from {url}")
        return {"server": server, "_meta": extra}

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout, follow_redirects=True, headers={"Accept": "application/json"})

    async def _get_json(
        self, http: httpx.AsyncClient, path: str, params: dict[str, Any], missing: str = ""
    ) -> tuple[Any, str]:
        """The decoded answer and the URL that gave it. A 404 means "no such server" when `missing` names one."""
        url = f"{self.base_url}/{self.api_version}{path}"
        try:
            async with asyncio.timeout(self.timeout), http.stream("GET", url, params=params) as response:
                url, status, data = str(response.url), response.status_code, bytearray()
                if status == 404 and missing:
                    raise RegistryError(f"the MCP Registry at {self.base_url} has no server {missing}; search for it")
                too_big = RegistryError(f"{url} answered more than {self.max_bytes} bytes; {HINT}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise too_big
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > self.max_bytes:
                        raise too_big
        except (httpx.TimeoutException, TimeoutError):
            raise RegistryError(f"the MCP Registry at {url} did not answer within {self.timeout:g}s; {HINT}") from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise RegistryError(f"cannot reach the MCP Registry at {url} ({reason}); {HINT}") from None
        if status != 200:
            detail = _detail(bytes(data))
            raise RegistryError(f"{url} answered HTTP {status}{': ' + detail if detail else ''}; {HINT}")
        try:
            return json.loads(bytes(data)), url
        except (ValueError, RecursionError):
            raise RegistryError(f"{url} did not answer JSON; {HINT}") from None


def _detail(data: bytes) -> str:
    """The message of an error answer (problem+json `detail`, or `error`), else its first line of text."""
    try:
        body = json.loads(data)
        text = next((str(body[k]) for k in ("detail", "error", "title") if isinstance(body, dict) and body.get(k)), "")
    except (ValueError, RecursionError):
        text = next(iter(data[:200].decode("utf-8", "replace").strip().splitlines()), "")
    return "".join(c for c in text if c.isprintable())[:200]


def _unwrap(item: Any, where: str, hint: str = f"; {HINT}") -> tuple[dict[str, Any], dict[str, Any]]:
    """(server.json, _meta) of a `{"server", "_meta"}` answer; a bare server.json is accepted too."""
    server = item.get("server") if isinstance(item, dict) and isinstance(item.get("server"), dict) else item
    if not isinstance(server, dict) or not isinstance(server.get("name"), str) or not server["name"]:
        raise RegistryError(f"{where} is not a registry entry (it has no server name){hint}")
    return server, _obj(item.get("_meta")) if item is not server else {}


def _obj(raw: Any) -> dict[str, Any]:
    return raw if isinstance(raw, dict) else {}


def _dicts(raw: Any) -> list[dict[str, Any]]:
    return [x for x in raw if isinstance(x, dict)] if isinstance(raw, list) else []


def _official(extra: dict[str, Any]) -> dict[str, Any]:
    return _obj(extra.get("io.modelcontextprotocol.registry/official"))


def _trim(item: dict[str, Any], keys: tuple[str, ...] = INPUT_KEYS, lists: tuple[str, ...] = ()) -> dict[str, Any]:
    """`item` with only `keys` (those set), and each of `lists` as a list of trimmed inputs."""
    out = {k: item[k] for k in keys if item.get(k) not in (None, "", [])}
    out |= {k: [_trim(i) for i in _dicts(item.get(k))] for k in lists if _dicts(item.get(k))}
    return out


def _summary(server: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """One search result: seed 000's `search_registry` fields plus title, version, status, packages, remotes."""
    inputs = ("environmentVariables", "packageArguments", "runtimeArguments")
    packages = [
        _trim(p, ("registryType", "identifier", "version", "runtimeHint"), inputs)
        | {"transport": _trim(_obj(p.get("transport")), ("type", "url"), ("headers",))}
        for p in _dicts(server.get("packages"))
    ]
    remotes = [_trim(r, ("type", "url"), ("headers",)) for r in _dicts(server.get("remotes"))]
    first, remote = (packages or [{}])[0], (remotes or [{}])[0]
    return {
        "name": server["name"],
        "title": str(server.get("title") or ""),
        "description": str(server.get("description") or ""),
        "version": str(server.get("version") or ""),
        "package": str(first.get("identifier") or remote.get("url") or ""),
        "package_type": str(first.get("registryType") or ("remote" if remotes else "")),
        "source_url": str(_obj(server.get("repository")).get("url") or server.get("websiteUrl") or ""),
        "status": str(_official(extra).get("status") or ""),
        "packages": packages,
        "remotes": remotes,
    }


@dataclass
class _Plan:
    """How one entry runs (argv, or url and headers) and what the user has to provide (secrets, missing)."""

    name: str
    version: str
    kind: str = ""  # npm | pypi | remote
    argv: list[str] = field(default_factory=list)
    env: list[tuple[str, str]] = field(default_factory=list)
    remote: dict[str, Any] = field(default_factory=dict)  # url, transport, headers
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    missing: list[dict[str, Any]] = field(default_factory=list)

    def secret(self, name: str, item: dict[str, Any]) -> str:
        entry = self.secrets.setdefault(name, {"name": name, "description": "", "required": False})
        entry["description"] = entry["description"] or str(item.get("description") or "")
        entry["required"] = entry["required"] or bool(item.get("isRequired"))
        return f"${{secret:{name}}}"

    def lack(self, name: str, item: dict[str, Any], where: str, secret: bool = False) -> None:
        about = str(item.get("description") or "")
        self.missing.append({"name": name, "description": about, "where": where, "secret": secret})

    def literal(self, text: str, label: str) -> str:
        if SECRET_REF_RE.search(text) or "\0" in text or "\n" in text or "\r" in text:
            raise RegistryError(
                f"registry entry {self.name}: {label} holds a line break or a ${{secret:...}} reference"
            )
        return text

    def value(self, item: dict[str, Any], label: str, where: str, secret_name: str) -> str | None:
        """The value of one input (env var, header or argument); None leaves it out (listed when required)."""
        if isinstance(item.get("value"), str):
            return self.fill(item["value"], item, label, where)
        if item.get("isSecret"):
            return self.secret(secret_name, item)
        if isinstance(item.get("default"), (str, int, float)) and not isinstance(item.get("default"), bool):
            return self.literal(str(item["default"]), label)
        if item.get("isRequired"):
            self.lack(label, item, where)
        return None

    def fill(self, text: str, item: dict[str, Any], label: str, where: str) -> str | None:
        """`text` with its `{variables}` filled in; None when one of them has no value."""
        variables, out, lacking = _obj(item.get("variables")), [], False
        for i, part in enumerate(VARIABLE_RE.split(self.literal(text, label))):
            var = variables.get(part) if i % 2 else None
            if not isinstance(var, dict):
                out.append(part if i % 2 == 0 else "{" + part + "}")  # not a declared variable: kept as it is
            elif isinstance(var.get("value"), str):
                out.append(self.literal(var["value"], label))
            elif isinstance(var.get("default"), str) and not var.get("isSecret"):
                out.append(self.literal(var["default"], label))
            elif var.get("isSecret"):
                out.append(self.secret(_secret_name(part), var))
            else:
                self.lack(f"{label} {{{part}}}", var, where)
                lacking = True
        return None if lacking else "".join(out)

    def arguments(self, raw: Any, where: str) -> list[str]:
        argv: list[str] = []
        for i, arg in enumerate(_dicts(raw)):
            flag = arg.get("name") if arg.get("type") == "named" else None
            if flag is not None and (not isinstance(flag, str) or not flag.isprintable() or not flag.split() == [flag]):
                raise RegistryError(f"registry entry {self.name}: {where}[{i}] has an invalid flag name {flag!r}")
            label, before = str(flag or arg.get("valueHint") or f"{where}[{i}]"), dict(self.secrets)
            secret = bool(arg.get("isSecret")) and not isinstance(arg.get("value"), str)
            value = None if secret else self.value(arg, label, where, "")
            if secret or (value is not None and SECRET_REF_RE.search(value)):
                self.secrets = before  # a secret never goes on a command line
                self.lack(label, arg, where, secret=True)
            elif value is not None:  # an argument without a value is left out, its flag too
                argv += [flag, value] if flag else [value]
        return argv

    def inputs(self, raw: Any, where: str, check: re.Pattern[str], header: bool = False) -> list[tuple[str, str]]:
        pairs = []
        for item in _dicts(raw):
            name = item.get("name")
            if not isinstance(name, str) or not check.fullmatch(name):
                raise RegistryError(f"registry entry {self.name}: {where} has an invalid name {name!r}")
            value = self.value(item, name, where, _secret_name(name) if header else name)
            if value is not None:
                pairs.append((name, value))
        return pairs


def _secret_name(raw: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", raw.lstrip("-")).upper()
    return name if re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) else f"_{name}"


def _plan(entry: Mapping[str, Any]) -> _Plan:
    server, _ = _unwrap(entry, "the entry", "")
    plan = _Plan(server["name"], str(server.get("version") or ""))
    packages, remotes = _dicts(server.get("packages")), _dicts(server.get("remotes"))
    for package in packages:
        runtime, identifier = RUNTIMES.get(str(package.get("registryType"))), package.get("identifier")
        if runtime is None or _obj(package.get("transport")).get("type", "stdio") != "stdio":
            continue
        if not isinstance(identifier, str) or not PACKAGE_RE.fullmatch(identifier):
            raise RegistryError(f"registry entry {plan.name}: {identifier!r} is not a valid package name")
        version = plan.literal(str(package.get("version") or ""), "the package version")
        plan.kind, plan.argv = str(package["registryType"]), [runtime, *(["-y"] if runtime == "npx" else [])]
        if package.get("runtimeHint") in (None, runtime):  # runtime arguments meant for another runtime: dropped
            plan.argv += plan.arguments(package.get("runtimeArguments"), "runtimeArguments")
        plan.argv.append(identifier + ({"npx": f"@{version}", "uvx": f"=={version}"}[runtime] if version else ""))
        plan.argv += plan.arguments(package.get("packageArguments"), "packageArguments")
        plan.env = plan.inputs(package.get("environmentVariables"), "environmentVariables", ENV_NAME_RE)
        return plan
    for remote in remotes:
        if remote.get("type") in ("streamable-http", "sse") and isinstance(remote.get("url"), str):
            url = plan.fill(remote["url"], remote, "url", "remotes") or ""
            if not url or "{" in url or SECRET_REF_RE.search(url):
                raise RegistryError(f"registry entry {plan.name}: its remote URL {remote['url']!r} needs values")
            _check_url(url, f"registry entry {plan.name}: the remote URL")
            headers = plan.inputs(remote.get("headers"), "headers", HEADER_NAME_RE, header=True)
            plan.kind, plan.remote = "remote", {"url": url, "transport": remote["type"], "headers": tuple(headers)}
            return plan
    kinds = sorted({str(p.get("registryType")) for p in packages} | {str(r.get("type")) for r in remotes})
    if "oci" in kinds:
        raise RegistryError(f"registry entry {plan.name}: oci packages are not supported yet")
    raise RegistryError(
        f"registry entry {plan.name} has no stdio npm or PyPI package and no streamable-http or sse remote "
        f"(it offers: {', '.join(kinds) or 'nothing'})"
    )


def to_upstream(entry: Mapping[str, Any], prefix: str) -> UpstreamServer:
    """The `UpstreamServer` (a tools.toml `[[servers]]` table) that runs a registry entry (`get`'s answer or a
    bare server.json) under `prefix`. Pure; a `RegistryError` says why an entry cannot be run."""
    if not isinstance(prefix, str) or (prefix and not PREFIX_RE.fullmatch(prefix)):
        raise InvalidQuery(f"prefix {prefix!r} must be letters, digits, '_' or '-' (or '' for no prefix)")
    plan = _plan(entry)
    if plan.remote:
        return UpstreamServer(namespace=prefix, **plan.remote)
    return UpstreamServer(namespace=prefix, command=shlex.join(plan.argv), env=tuple(plan.env))


def requirements(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What the user provides before `to_upstream(entry, ...)` runs: the `runtime` on PATH ("npx", "uvx" or
    None), `secrets` [{name, description, required}] for the secrets store, and `missing` inputs
    [{name, description, where, secret}] that have no value and were left out."""
    plan = _plan(entry)
    runtime = plan.argv[0] if plan.argv else None
    needs = {"name": plan.name, "version": plan.version, "kind": plan.kind, "runtime": runtime}
    return needs | {"secrets": list(plan.secrets.values()), "missing": plan.missing}
