"""The dashboard's JSON endpoints, handed what they need of the gateway (`tooldock.dashboard` imports none of
it): `/whoami` and `/keys` (the key store), `/audit` and `/audit/stats` (the audit log's folder, and which
tools a key may see), `/secrets` (the secrets store, the namespaces' declared names, a reload after a set)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from tooldock.dashboard import audit_router, keys_router, secrets_router
from tooldock.keys import ApiKey, KeyStore
from tooldock.runtime import requestid
from tooldock.runtime.access import key_of
from tooldock.runtime.engine import Engine
from tooldock.runtime.observe import AuditLog


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
    store = secrets.store if secrets is not None else None
    app.include_router(secrets_router(store, declared, key_of, audit.record, requestid.of_scope, reload))
