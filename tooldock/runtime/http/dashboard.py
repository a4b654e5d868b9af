"""The dashboard's JSON endpoints, handed what they need of the gateway (`tooldock.dashboard` imports none of
it): `/whoami` and `/keys` (the key store), `/audit` and `/audit/stats` (the audit log's folder, and which
tools a key may see), `/secrets` (the secrets store, the namespaces' declared names, a reload after a set),
`/overview` (the namespaces as `/namespaces` lists them, each worker's identity and container image, the
snapshot's generation and when it began)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI

from tooldock.dashboard import audit_router, keys_router, overview_router, secrets_router
from tooldock.keys import ApiKey, KeyStore
from tooldock.runtime import requestid
from tooldock.runtime.access import key_of, restricted
from tooldock.runtime.engine import Engine
from tooldock.runtime.observe import AuditLog
from tooldock.state import replica_name

_IMAGES: dict[str, str | None] = {}  # container id -> its image id (a container's image never changes)


async def _image_of(worker: Any) -> str | None:
    """A docker worker's container image id (sha256:...), looked up once per container."""
    container, client = getattr(worker, "container_id", None), getattr(getattr(worker, "backend", None), "client", None)
    if not isinstance(container, str) or client is None:
        return None
    if container not in _IMAGES:
        try:
            found = await asyncio.to_thread(client.containers.get, container)
            _IMAGES[container] = str(found.attrs.get("Image") or "") or None
        except Exception:  # gone, or the daemon unreachable: the overview shows none
            return None
    return _IMAGES[container]


def include_dashboard(app: FastAPI, engine: Engine, keys: KeyStore, audit: AuditLog, secrets: Any) -> None:
    """`secrets`: the gateway's SecretMap, or None when it runs without a store."""
    registry = engine.registry

    def sees(key: ApiKey, namespace: str, tool: str) -> bool:
        entry = registry.snapshot.entries.get(namespace)
        if entry is None:
            return False
        descriptor = next((t for t in entry.tools if t.get("name") == tool), None)
        return descriptor is not None and bool(engine.visible(namespace, [descriptor], key))

    def declared() -> dict[str, dict[str, Any]]:
        found = {}
        for name, entry in registry.snapshot.entries.items():
            if entry.source.config.secrets:
                found[name] = {"declared": list(entry.source.config.secrets), **entry.secrets.to_dict()}
        return found

    async def reload() -> None:
        await registry.reload(retry_failed=False)

    app.include_router(keys_router(keys, key_of, audit.record, requestid.of_scope))
    app.include_router(audit_router(audit.directory, key_of, sees))

    async def overview(key: ApiKey | None) -> dict[str, Any]:
        snapshot, key = registry.snapshot, restricted(key)
        listed = []
        for name in engine.namespaces(key):
            entry = snapshot.entries[name]
            tools = engine.visible(name, entry.tools, key)
            image = await _image_of(entry.worker) if entry.worker is not None else None
            worker = entry.worker  # the object itself (an id() could be reused by the next worker)
            listed.append(
                {
                    **entry.status(),
                    "tools": [t["name"] for t in tools],
                    "tool_count": len(tools),
                    "image": image,
                    "worker_id": worker,
                }
            )
        problems = [p.to_dict() for p in snapshot.problems if key is None or key.allows_namespace(p.file.split("/")[0])]
        return {
            "namespaces": listed,
            "problems": problems,
            "replica": {"name": replica_name(), "generation": snapshot.generation},
            "changed": {"generation": snapshot.generation, "at": snapshot.at},
        }

    app.include_router(overview_router(overview, key_of))
    store = secrets.store if secrets is not None else None
    app.include_router(secrets_router(store, declared, key_of, audit.record, requestid.of_scope, reload))
