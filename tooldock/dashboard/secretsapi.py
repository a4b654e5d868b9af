"""`GET /secrets`: each secret name's status (set, placeholder, missing) by scope and which namespaces declare
it, never a value; `PUT /secrets/{name}` (the bearer token or an admin key without globs): set or rotate a
value, stored exactly as `tooldock secrets set` stores it (`SecretStore.set`), then the gateway reloads so
the namespaces that declare it get it.

The value is read from the raw body (`{"value": "..."}`) by this module, not by FastAPI's validation, whose
error would echo the input: no answer, log line or audit line carries it, only the name and its scope. A
key sees the names of the namespaces it covers (and the global names they declare); only an admin writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Query, Request

from tooldock.dashboard.keysapi import Caller, Record, RequestId
from tooldock.errors import BadRequest, Forbidden, SecretsError
from tooldock.keys import ApiKey
from tooldock.secrets import SecretStore

log = logging.getLogger("tooldock.secrets")
Declared = Callable[[], dict[str, dict[str, Any]]]  # namespace -> {"declared": [...], "secrets_status": ...}
Reload = Callable[[], Awaitable[Any]]
MAX_BODY = 128 * 1024


def rows(store: SecretStore | None, declared: dict[str, dict[str, Any]], key: ApiKey | None) -> dict[str, Any]:
    """Every name a visible namespace declares or the store holds, with its status and who declares it."""
    open_ = key is None or key.unrestricted
    shown = {ns: d for ns, d in declared.items() if open_ or (key is not None and key.allows_namespace(ns))}
    stored = store.statuses() if store is not None and store.exists() else []
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for row in stored:
        if row["scope"] == "global" or row["scope"] in shown or open_:
            found[(row["key"], row["scope"])] = {**row, "declared_by": []}
    for ns, info in sorted(shown.items()):
        for name in info.get("declared", []):
            own = found.get((name, ns))
            target = own if own is not None else found.get((name, "global"))
            if target is None:
                target = found[(name, ns)] = {"key": name, "scope": ns, "status": "missing", "declared_by": []}
            target["declared_by"].append(ns)
    listed = [r for r in found.values() if open_ or r["scope"] != "global" or r["declared_by"]]
    listed.sort(key=lambda r: (r["key"], r["scope"] != "global", r["scope"]))
    namespaces = [
        {"name": ns, **{k: v for k, v in info.items() if k != "declared"}, "declared": info.get("declared", [])}
        for ns, info in sorted(shown.items())
    ]
    return {"store": store is not None and store.exists(), "names": listed, "namespaces": namespaces}


def secrets_router(
    store: SecretStore | None, declared: Declared, caller: Caller, record: Record, request_id: RequestId, reload: Reload
) -> APIRouter:
    router = APIRouter()

    @router.get(
        "/secrets", summary="Each secret name's status by scope and the namespaces that declare it; never a value"
    )
    async def list_secrets(request: Request) -> dict[str, Any]:
        try:
            return await asyncio.to_thread(rows, store, declared(), caller(request.scope))
        except (SecretsError, OSError) as exc:
            raise BadRequest(f"the gateway cannot read its secrets store: {_why(exc)}") from None

    @router.put(
        "/secrets/{name}",
        summary="Set or rotate a secret's value (admin); the value is never answered or logged",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["value"],
                            "properties": {"value": {"type": "string", "writeOnly": True}},
                        }
                    }
                },
            }
        },
    )
    async def set_secret(
        request: Request, name: str, namespace: str | None = Query(None, max_length=200, description="Default: global")
    ) -> dict[str, Any]:
        by = caller(request.scope)
        if by is not None and not by.unrestricted:
            raise Forbidden(
                f"{by.who()} may not set secrets: that takes the bearer token or an admin key without globs"
            )
        if store is None:
            raise BadRequest("this gateway has no secrets store (tooldock secrets init makes one; then restart it)")
        value = await _value(request)
        try:
            await asyncio.to_thread(store.set, name, value, namespace or None)
        except (SecretsError, OSError) as exc:
            raise BadRequest(f"{name[:80]} was not stored: {_why(exc)}") from None
        del value
        scope = namespace or "global"
        record(
            {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "front_end": "http",
                "client": request.client.host if request.client else None,
                "request_id": request_id(request.scope),
                **(by.audit_fields() if by is not None else {}),
                "method": "secrets/set",
                "target": f"{name} ({scope})",
                "status": "ok",
            }
        )
        log.info("secrets/set: %s (%s) by %s over HTTP", name, scope, by.who() if by else "the bearer token")
        reloaded = True
        try:
            await reload()
        except Exception as exc:  # the value is stored; the reload's failure is the namespaces' to report
            log.warning("reload after setting %s failed: %s", name, exc)
            reloaded = False
        return {"key": name, "scope": scope, "status": "set", "reloaded": reloaded}

    return router


async def _value(request: Request) -> str:
    body = await request.body()
    if len(body) > MAX_BODY:
        raise BadRequest(f"the body is over {MAX_BODY} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise BadRequest('the body must be JSON: {"value": "..."}') from None
    value = data.get("value") if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        raise BadRequest('the body must be {"value": "<a non-empty string>"}')
    return value


def _why(exc: SecretsError | OSError) -> str:
    if isinstance(exc, OSError):
        return f"{exc.filename or 'the store'}: {exc.strerror or exc}"
    return str(exc)
