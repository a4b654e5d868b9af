"""`GET /audit` (the server's recent calls, from the audit log, filtered) and `GET /audit/stats` (calls, errors
and latency per namespace and tool over time, for the Metrics charts), for any credential: a key sees only
the lines of the namespaces and tools its scope lets it see (`Sees`, handed in by the gateway), and the lines
that name no namespace (API keys made or revoked, secrets set) only when it may manage keys.

The lines are read by `auditread`, newest first and boundedly; `since` (a line's `time`) returns only the
newer ones, which is how the page follows the log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request

from tooldock.dashboard import auditread
from tooldock.keys import ApiKey

Caller = Callable[[Any], ApiKey | None]
Sees = Callable[[ApiKey, str, str], bool]  # (key, namespace, tool) -> may this key see that tool's calls
MAX_LIMIT = 1000


def visible(key: ApiKey | None, sees: Sees) -> Callable[[dict[str, Any]], bool]:
    if key is None or key.unrestricted:
        return lambda line: True

    def check(line: dict[str, Any]) -> bool:
        namespace = line.get("namespace")
        if not isinstance(namespace, str) or not key.allows_namespace(namespace):
            return False
        tool = line.get("tool")
        return not isinstance(tool, str) or sees(key, namespace, tool)

    return check


def audit_router(directory: Path | None, caller: Caller, sees: Sees) -> APIRouter:
    router = APIRouter()

    def recent(key: ApiKey | None, wanted: dict[str, str], since: str | None, limit: int) -> dict[str, Any]:
        allowed, found = visible(key, sees), []
        for line in auditread.lines(directory):
            if since is not None and str(line.get("time", "")) <= since:
                break
            if allowed(line) and auditread.matches(line, wanted):
                found.append(line)
                if len(found) >= limit:
                    break
        return {"enabled": directory is not None, "lines": found}

    @router.get("/audit", summary="The server's recent calls from the audit log, newest first, filtered")
    async def audit(
        request: Request,
        namespace: str | None = Query(None, max_length=200),
        tool: str | None = Query(None, max_length=500, description="A tool's name (or a line's target)"),
        status: str | None = Query(None, max_length=50),
        key: str | None = Query(None, max_length=100, description="An API key's id"),
        request_id: str | None = Query(None, max_length=128),
        since: str | None = Query(None, max_length=40, description="Only lines newer than this `time`"),
        limit: int = Query(200, ge=1, le=MAX_LIMIT),
    ) -> dict[str, Any]:
        given = {"namespace": namespace, "tool": tool, "status": status, "key_id": key, "request_id": request_id}
        wanted = {field: value for field, value in given.items() if value}
        return await asyncio.to_thread(recent, caller(request.scope), wanted, since, limit)

    @router.get("/audit/stats", summary="Calls, errors, p50 and p95 latency per namespace and tool over time")
    async def audit_stats(
        request: Request,
        minutes: int = Query(60, ge=1, le=24 * 60),
        step: int = Query(60, ge=5, le=3600, description="Seconds per point"),
    ) -> dict[str, Any]:
        allowed = visible(caller(request.scope), sees)
        body = await asyncio.to_thread(auditread.stats, auditread.lines(directory), time.time(), minutes, step, allowed)
        return {"enabled": directory is not None, **body}

    return router
