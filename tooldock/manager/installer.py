"""Seed 000's installer: find servers in the MCP Registry, and put one behind a namespace as an upstream server.

`search_registry` is the registry client's search (`MCP_REGISTRY_URL`). `install_upstream` is ToolDock's
`mode="upstream"`: instead of translating a server, it appends a `[[servers]]` table naming the registry
entry to the namespace's `tools.toml` (the gateway resolves it to `npx` / `uvx` / a remote at start, see
tooldock/upstream/resolve.py), with every secret the entry needs written as a `${secret:NAME}` reference and
a placeholder for it in the secrets store. Values never pass through here: the user sets them in a terminal.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from tooldock.errors import AlreadyExists, InvalidInput, Missing, RegistryError
from tooldock.manager import secrets
from tooldock.manager.workspace import Workspace, atomic_write
from tooldock.namespace.models import NESTED_TOO_DEEPLY
from tooldock.namespace.toolsfile import (
    ENV_NAME_RE,
    PREFIX_RE,
    SECRET_REF_RE,
    TOOLS_FILE,
    ToolsFileError,
    parse_tools_file,
)
from tooldock.secrets import SecretStore
from tooldock.upstream.registry import NAME_RE, RegistryClient, requirements, to_upstream

SEARCH_LIMIT = 20
MAX_ENV = 32


async def search_registry(query: object, client: RegistryClient | None = None) -> list[dict[str, Any]]:
    if not isinstance(query, str):
        raise InvalidInput("query must be a search term such as 'github'")
    return await (client or RegistryClient()).search(query, SEARCH_LIMIT)


async def find_entry(package: object, client: RegistryClient | None = None) -> dict[str, Any]:
    """The registry entry for a server name (`io.github.owner/server`) or a package identifier from a search
    result (`@modelcontextprotocol/server-everything`, `mcp-server-time`)."""
    if not isinstance(package, str) or not package.strip() or len(package) > 200 or not package.isprintable():
        raise InvalidInput("package must be a package name or registry server name from search_registry's results")
    package, client = package.strip(), client or RegistryClient()
    if NAME_RE.fullmatch(package) and not package.startswith("@"):
        try:
            return await client.get(package)
        except RegistryError as exc:
            if "has no server" not in str(exc):
                raise
    last = package.split("/")[-1]
    short = re.sub(r"^(mcp-server-|server-|mcp-)|(-mcp-server|-mcp|-server)$", "", last)
    for term in dict.fromkeys(t for t in (last, short) if t):  # registries search names and descriptions
        for hit in await client.search(term, 100):
            identifiers = {p.get("identifier") for p in hit["packages"]} | {hit["package"], hit["name"]}
            if package in identifiers:
                return await client.get(hit["name"])
    raise Missing(
        f"no server in the MCP Registry has the package or name {package!r}; call search_registry and use the "
        "'package' or 'name' of a result",
        {"package": package},
    )


def default_prefix(entry: dict[str, Any]) -> str:
    """`io.github.modelcontextprotocol/server-everything` -> `everything`; `.../mcp-server-time` -> `time`."""
    last = str(entry["server"]["name"]).split("/")[-1].lower()
    last = re.sub(r"^(mcp-server-|server-|mcp-)|(-mcp-server|-mcp|-server)$", "", last) or last
    prefix = re.sub(r"[^a-z0-9_-]", "_", last).strip("_-")[:40]
    return prefix if PREFIX_RE.fullmatch(prefix) else "server"


def env_values(env: object) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, dict) or len(env) > MAX_ENV:
        raise InvalidInput(f'env must be an object of at most {MAX_ENV} NAME: "value" pairs, e.g. {{"TZ": "UTC"}}')
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
            raise InvalidInput(f"env: {name!r} is not an environment variable name")
        if not isinstance(value, str) or "\n" in value or "\r" in value or "\0" in value:
            raise InvalidInput(f"env.{name} must be a one-line string")
        if SECRET_REF_RE.search(value):
            raise InvalidInput(f"env.{name}: secrets are set by the user in a terminal, not here; leave it out")
    return dict(env)


def server_table(values: dict[str, str], tables: dict[str, dict[str, str]]) -> str:
    """A `[[servers]]` table for tools.toml: its string values in order, then its non-empty inline tables."""
    lines = ["", "[[servers]]", *(f"{key} = {json.dumps(value)}" for key, value in values.items())]
    for key, pairs in tables.items():
        if pairs:
            lines.append(
                f"{key} = {{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in pairs.items()) + " }"
            )
    return "\n".join(lines) + "\n"


def _table(prefix: str, entry: dict[str, Any], env: dict[str, str], refs: dict[str, dict[str, str]]) -> str:
    server = entry["server"]
    values = {"namespace": prefix, "registry": server["name"]}
    if server.get("version"):
        values["version"] = str(server["version"])
    return server_table(values, {"env": env | refs.get("env", {}), "headers": refs.get("headers", {})})


def install_upstream(
    ws: Workspace, store: SecretStore, entry: dict[str, Any], namespace: object, prefix: object, env: object
) -> dict[str, Any]:
    folder = ws.namespace_dir(namespace, must_exist=False)
    name = folder.name
    prefix = default_prefix(entry) if prefix in (None, "") else prefix
    if not isinstance(prefix, str) or not PREFIX_RE.fullmatch(prefix):
        raise InvalidInput(f"prefix {prefix!r} must be letters, digits, '_' or '-', e.g. 'github'")
    values = env_values(env)
    spec = to_upstream(entry, prefix)  # refuses entries that cannot run (oci, nothing runnable)
    needs = requirements(entry)
    remote = bool(spec.url)
    if remote and values:
        raise InvalidInput(f"{needs['name']} is a remote server: it takes no env (its headers come from the registry)")
    lacking = [m for m in needs["missing"] if m["name"].split(" {")[0] not in values]
    if lacking:
        listed = "; ".join(
            f"{m['name']} ({m['where']}{': ' + m['description'] if m['description'] else ''})" for m in lacking
        )
        if remote or any(m["where"] not in ("environmentVariables",) for m in lacking):
            raise InvalidInput(
                f"{needs['name']} needs values that cannot be given here: {listed}; translate it instead "
                "(mode='translate') or ask the user to write its command into tools.toml"
            )
        raise InvalidInput(
            f"{needs['name']} needs values nobody gave: {listed}; call install_from_registry again with "
            f'env={{"{lacking[0]["name"]}": "..."}} (ask the user for them; never for secrets)'
        )
    # what carries a secret is written as a reference; the rest comes from the entry when the gateway resolves it
    pairs = spec.headers if remote else spec.env
    refs = {("headers" if remote else "env"): {k: v for k, v in pairs if SECRET_REF_RE.search(v)}}
    names = sorted({ref for v in refs[next(iter(refs))].values() for ref in SECRET_REF_RE.findall(v)})
    written = add_server(ws, store, folder, prefix, _table(prefix, entry, values, refs), names)
    return {
        "namespace": name,
        "mode": "upstream",
        "server": needs["name"],
        "version": needs["version"],
        "prefix": prefix,
        "runs": spec.url or spec.command,
        "runtime": needs["runtime"],
        **written,
    }


def add_server(
    ws: Workspace, store: SecretStore, folder: Path, prefix: str, table: str, secret_names: list[str]
) -> dict[str, Any]:
    """Append a `[[servers]]` table to the namespace's tools.toml (atomically), activate `<prefix>_*`, and
    prepare a placeholder for each secret it references: "tools_toml", "secrets" and "next_steps"."""
    name = folder.name
    if folder.exists() and any(p.suffix == ".py" for p in folder.iterdir()):
        raise InvalidInput(
            f"namespace {name!r} holds tool files; a namespace serves tool files or upstream servers, not both: "
            "choose a new namespace name"
        )
    path = folder / TOOLS_FILE
    before = path.read_text(encoding="utf-8") if path.is_file() else ""
    try:
        text = _activated(before, f"{prefix}_*") + table
        parsed = parse_tools_file(tomllib.loads(text))
    except (ToolsFileError, ValueError) as exc:
        raise InvalidInput(f"{TOOLS_FILE} would not be valid: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"{path} is {NESTED_TOO_DEEPLY} first") from None
    if f"{prefix}_*" not in parsed.active_toolsets:
        raise InvalidInput(f"cannot add {prefix}_* to active_toolsets in {path}: ask the user to edit it by hand")
    new = parsed.servers[-1]
    same = (new.registry, new.command, new.namespace)
    if any((s.registry, s.command, s.namespace) == same for s in parsed.servers[:-1]):
        raise AlreadyExists(f"{new.label} is already a server of namespace {name!r}")
    taken = [s for s in parsed.servers[:-1] if s.namespace == new.namespace]
    if taken:  # the same names: the first server listed would answer for both
        raise AlreadyExists(
            f"prefix {new.namespace!r} is taken by {taken[0].label} in namespace {name!r}; give this server "
            "another one (prefix=...)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text.encode())
    prepared = [secrets.prepare_secret(ws, store, key, name) for key in secret_names]
    return {
        "tools_toml": str(path),
        "secrets": [{k: p[k] for k in ("key", "status", "instructions")} for p in prepared],
        "next_steps": _next(name, prepared),
    }


_TOOLSETS_RE = re.compile(r"^active_toolsets\s*=\s*\[[^\]]*\]", re.MULTILINE)


def _activated(text: str, glob: str) -> str:
    """`text` (a tools.toml or "") with `glob` in its top-level `active_toolsets`, so the new server's tools
    work at once; the rest of the file is kept as written (comments too)."""
    if not text.strip():
        return f"active_toolsets = {json.dumps([glob])}\n"
    head, sep, rest = text.partition("[[servers]]")
    current = tomllib.loads(text).get("active_toolsets", [])
    line = f"active_toolsets = {json.dumps([*current, glob] if glob not in current else current)}"
    if _TOOLSETS_RE.search(head):
        return _TOOLSETS_RE.sub(lambda _: line, head, count=1) + sep + rest
    return f"{line}\n" + text


def _next(name: str, prepared: list[dict[str, Any]]) -> str:
    steps = []
    todo = [p for p in prepared if p["status"] == "placeholder"]
    if todo:
        steps.append("tell the user to run: " + "; ".join(secrets.set_command(p["key"], name) for p in todo))
    steps.append(f"call reload_core(), then list_tools or test_tool on namespace {name!r}")
    return "; then ".join(steps)
