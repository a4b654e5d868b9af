"""`registry = "..."` servers: the MCP Registry entry turned into the command or URL that runs it (seed 003).

    [[servers]]
    namespace = "time"
    registry = "io.github.modelcontextprotocol/time"   # -> uvx mcp-server-time==2026.10.19
    version = "2026.10.19"                              # optional; the latest when left out
    env = { LOCAL_TIMEZONE = "Europe/Paris" }           # fills or overrides the entry's inputs

The entry is fetched with the registry client the manager uses (`MCP_REGISTRY_URL`) each time the server
starts, and kept on disk: when the registry cannot be reached the last entry fetched is used, so a gateway
restart does not depend on the registry being up. What the tools.toml table gives (`env`, `headers`,
`cwd`) goes over what the entry says. An input the entry requires and nobody gave, or a secret the entry
needs that the namespace does not declare, stops the server with a message naming it and saying where to
put it: values are never guessed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tooldock.atomic import atomic_write
from tooldock.errors import RegistryError
from tooldock.namespace.toolsfile import SECRET_REF_RE, UpstreamServer
from tooldock.upstream.registry import InvalidQuery, RegistryClient, requirements, to_upstream


class Resolver:
    """Resolves the registry servers of one namespace; `cache_dir` keeps the entries last fetched."""

    def __init__(self, namespace: str, cache_dir: Path | None, client: RegistryClient | None = None) -> None:
        self.namespace, self.cache_dir, self._client = namespace, cache_dir, client

    async def resolve(self, spec: UpstreamServer, secrets: Mapping[str, str]) -> UpstreamServer:
        """The server to run for `spec`: itself unless it names a registry entry. Raises `RegistryError`."""
        if not spec.registry:
            return spec
        entry = await self._entry(spec)
        return merge(spec, entry, secrets, self.namespace)

    async def _entry(self, spec: UpstreamServer) -> dict[str, Any]:
        client = self._client or RegistryClient()  # reads MCP_REGISTRY_URL now: a changed setting applies on restart
        path = self._path(spec)
        try:
            entry = await client.get(spec.registry, spec.version or "latest")
        except InvalidQuery:
            raise
        except RegistryError as exc:
            cached = _read(path)
            if cached is None:
                raise
            print(
                f"tooldock: upstream {spec.label}: {exc}; using the entry fetched before (version "
                f"{cached.get('server', {}).get('version', '?')})",
                file=sys.stderr,
                flush=True,
            )
            return cached
        _write(path, entry)
        return entry

    def _path(self, spec: UpstreamServer) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(f"{spec.registry}@{spec.version}".encode()).hexdigest()[:16]
        return self.cache_dir / "registry" / f"{key}.json"


def merge(spec: UpstreamServer, entry: Mapping[str, Any], secrets: Mapping[str, str], namespace: str) -> UpstreamServer:
    """What runs: the entry's command or remote under `spec`'s prefix, with `spec`'s env, headers and cwd on top."""
    resolved = to_upstream(entry, spec.namespace)
    needs = requirements(entry)
    name = needs["name"]
    remote = bool(resolved.url)
    if remote and (spec.env or spec.cwd):
        raise RegistryError(f"registry entry {name} is a remote server: give it headers in tools.toml, not env or cwd")
    if not remote and spec.headers:
        raise RegistryError(f"registry entry {name} runs as a local command: give it env in tools.toml, not headers")
    env, headers = dict(resolved.env) | dict(spec.env), dict(resolved.headers) | dict(spec.headers)
    given = headers if remote else env
    lacking = [m for m in needs["missing"] if m["name"].split(" {")[0] not in given]  # "Header {variable}"
    if lacking:
        table = "headers" if remote else "env"
        listed = "; ".join(
            f"{m['name']} ({m['where']}{': ' + m['description'] if m['description'] else ''})" for m in lacking
        )
        arguments = any(m["where"] in ("runtimeArguments", "packageArguments") for m in lacking)
        hint = (
            'arguments cannot be filled in from tools.toml: write the server\'s command yourself (command = "...")'
            if arguments
            else f'add them to this server\'s {table} in tools.toml, e.g. {table} = {{ {lacking[0]["name"]} = "..." }}'
        )
        raise RegistryError(f"registry entry {name} needs values nobody gave: {listed}; {hint}")
    values = list(env.values()) + list(headers.values())
    unknown = sorted({ref for value in values for ref in SECRET_REF_RE.findall(value)} - set(secrets))
    if unknown:
        described = {s["name"]: s["description"] for s in needs["secrets"]}
        listed = ", ".join(f"{n} ({described[n]})" if described.get(n) else n for n in unknown)
        raise RegistryError(
            f"registry entry {name} needs the secret(s) {listed}, which this namespace does not have: "
            f"declare them in this namespace's tooldock.yaml "
            f"(secrets: [{', '.join(unknown)}]) and set each with `tooldock secrets set NAME --namespace {namespace}`"
        )
    return replace(resolved, env=tuple(env.items()), headers=tuple(headers.items()), cwd=spec.cwd)


def _read(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    with contextlib.suppress(OSError, ValueError, RecursionError):
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else None
    return None


def _write(path: Path | None, entry: Mapping[str, Any]) -> None:
    """Best effort and atomic: a full disk costs only the fallback."""
    if path is None:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(entry).encode(), mode=0o600)
