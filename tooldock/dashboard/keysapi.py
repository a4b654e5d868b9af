"""The JSON endpoints the dashboard needs beyond the REST API: who the caller is (`GET /whoami`, any
credential), and the API keys (`GET /keys`, `POST /keys`, `DELETE /keys/{key_id}`: the bearer token or an
admin key without globs only), over the same store `tooldock keys` writes (`tooldock.keys`).

A key made here is answered once, as `tooldock keys create` prints it once: only its hash is kept. Each
change is audited: a line in the audit log (`method` `keys/create` or `keys/revoke`, the key's id as
`target`, the caller's key id when a key made the change) and one on the gateway's log (`tooldock.keys`).
The gateway hands in how to find the caller's key, the audit log's `record` and the request id, so this
module imports nothing of it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from tooldock.errors import BadRequest, Forbidden, KeysError, NotFound
from tooldock.keys import ApiKey, KeyStore
from tooldock.oauth import TokenPrincipal

log = logging.getLogger("tooldock.keys")
Caller = Callable[[Any], ApiKey | None]  # the ASGI scope -> the key it was admitted with (None: the bearer token)
Record = Callable[[dict[str, Any]], None]  # the audit log's `record`
RequestId = Callable[[Any], str | None]  # the ASGI scope -> the request's id
ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
REFUSALS: dict[int | str, dict[str, Any]] = {
    400: {"description": "A name, scope, glob or duration is not valid", "content": ERROR},
    401: {"description": "No valid bearer token or API key", "content": ERROR},
    403: {"description": "Not the bearer token or an admin API key without globs", "content": ERROR},
}


class KeyInfo(BaseModel):
    """An API key as `tooldock keys list` shows it: never the key itself."""

    id: str
    name: str
    scope: Literal["read", "write", "admin"]
    namespaces: list[str] = Field(description="Namespace globs; empty: every namespace")
    tools: list[str] = Field(description="Tool globs; empty: every tool the scope allows")
    created: str | None
    expires: str | None
    last_used: str | None = Field(description="Kept to the minute")
    revoked: str | None
    state: Literal["active", "revoked", "expired"]
    rate: float | None = Field(description="Calls per second; null: no limit")


class KeyList(BaseModel):
    keys: list[KeyInfo]


class NewKey(BaseModel):
    name: str = Field(description="What the key is for", min_length=1, max_length=200)
    scope: Literal["read", "write", "admin"]
    namespaces: list[str] = Field(default_factory=list, description="Namespace globs (default: all)")
    tools: list[str] = Field(default_factory=list, description="Tool globs (default: all the scope allows)")
    expires_in: float | None = Field(default=None, gt=0, le=10 * 365 * 86400, description="Seconds until it expires")


class CreatedKey(BaseModel):
    key: KeyInfo
    secret: str = Field(description="The key (`tdk_...`): shown this once, never again")


class RevokedKey(BaseModel):
    key: KeyInfo


class Whoami(BaseModel):
    kind: Literal["token", "key", "oauth"] = Field(
        description="The bearer token, an API key, or an OAuth access token (name: its subject)"
    )
    id: str | None
    name: str | None
    scope: Literal["read", "write", "admin"]
    namespaces: list[str]
    tools: list[str]
    admin: bool = Field(description="May manage API keys: the bearer token or an admin key without globs")


def _stamp(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when is not None else None


def key_info(key: ApiKey, now: datetime) -> KeyInfo:
    return KeyInfo(
        id=key.id,
        name=key.name,
        scope=key.scope,
        namespaces=list(key.namespaces),
        tools=list(key.tools),
        created=_stamp(key.created),
        expires=_stamp(key.expires),
        last_used=_stamp(key.last_used),
        revoked=_stamp(key.revoked),
        state=key.state(now),  # type: ignore[arg-type]  # one of the three
        rate=key.rate,
    )


def keys_router(store: KeyStore, caller: Caller, record: Record, request_id: RequestId) -> APIRouter:
    router = APIRouter()

    def admin(request: Request) -> ApiKey | None:
        key = caller(request.scope)
        if key is not None and not key.unrestricted:
            raise Forbidden(
                f"{key.who()} may not manage API keys: that takes the bearer token or an admin key without "
                "--namespace or --tool globs"
            )
        return key

    def audit(request: Request, by: ApiKey | None, method: str, target: ApiKey) -> None:
        line = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "front_end": "http",
            "client": request.client.host if request.client else None,
            "request_id": request_id(request.scope),
            **(by.audit_fields() if by is not None else {}),
            "method": method,
            "target": target.id,
            "status": "ok",
        }
        record(line)
        who = by.who() if by is not None else "the bearer token"
        log.info("%s: API key %s (%r, scope %s) by %s over HTTP", method, target.id, target.name, target.scope, who)

    @router.get(
        "/whoami", summary="The caller: the bearer token or an API key, its scope and globs", responses=REFUSALS
    )
    async def whoami(request: Request) -> Whoami:
        key = caller(request.scope)
        if key is None:
            return Whoami(kind="token", id=None, name=None, scope="admin", namespaces=[], tools=[], admin=True)
        return Whoami(
            kind="oauth" if isinstance(key, TokenPrincipal) else "key",
            id=key.id,
            name=key.subject if isinstance(key, TokenPrincipal) else key.name,
            scope=key.scope,
            namespaces=list(key.namespaces),
            tools=list(key.tools),
            admin=key.unrestricted,
        )

    @router.get("/keys", summary="List the API keys (admin): scopes, globs, last use; never a key", responses=REFUSALS)
    async def list_keys(request: Request) -> KeyList:
        admin(request)
        keys, now = await asyncio.to_thread(_listed, store), datetime.now(UTC)
        return KeyList(keys=[key_info(k, now) for k in keys])

    @router.post(
        "/keys",
        status_code=201,
        summary="Create an API key (admin); the key is in this answer only",
        responses=REFUSALS,
    )
    async def create_key(request: Request, body: NewKey) -> CreatedKey:
        by = admin(request)
        try:
            key, secret = await asyncio.to_thread(
                store.create, body.name, body.scope, tuple(body.namespaces), tuple(body.tools), body.expires_in
            )
        except KeysError as exc:
            raise BadRequest(str(exc)) from None
        audit(request, by, "keys/create", key)
        return CreatedKey(key=key_info(key, datetime.now(UTC)), secret=secret)

    @router.delete(
        "/keys/{key_id}",
        summary="Revoke an API key (admin): its calls and streams in flight end",
        responses={**REFUSALS, 404: {"description": "No key with that id", "content": ERROR}},
    )
    async def revoke_key(request: Request, key_id: str) -> RevokedKey:
        by = admin(request)
        if key_id not in {k.id for k in await asyncio.to_thread(_listed, store)}:
            raise NotFound(f"no API key with id {key_id[:40]!r} (GET /keys lists them)")
        try:
            key = await asyncio.to_thread(store.revoke, key_id)
        except KeysError as exc:
            raise BadRequest(str(exc)) from None
        audit(request, by, "keys/revoke", key)
        return RevokedKey(key=key_info(key, datetime.now(UTC)))

    return router


def _listed(store: KeyStore) -> list[ApiKey]:
    try:
        return store.list()
    except KeysError as exc:  # the file is broken: the operator's to fix, said in the answer and the log
        log.warning("cannot read the API keys: %s", exc)
        raise BadRequest(f"the gateway cannot read its API keys file: {exc}") from None
