"""`GET /overview` and `GET /overview/live`: what the dashboard's overview shows, once or as it changes.

The answer is `/namespaces`' (each namespace the caller's key covers, with its state, worker, restarts,
secrets status, problems and upstream servers; the scanner's problems; the replica and its generation) with
what only the overview needs: `changed` (the generation of the namespaces served and when it began: the last
reload, or a stuck worker swapped), each namespace's `since` (the generation at which the dashboard first saw
its current worker, and when) and `image` (a container worker's image id, on the docker backend).

`/overview/live` is an event stream (`text/event-stream`, so a draining gateway ends it like its other
GET streams): one `overview` event at once, another whenever the answer changes (the gateway's state is
read in memory every `EVERY` seconds: no request, no worker is asked), and a comment every `PING` seconds
so proxies keep it open. The browser reads it with fetch (an EventSource cannot send the Authorization
header). It ends after `LIFETIME` seconds (the client reconnects) so a stream never outlives a revoked key
by long.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from tooldock.dashboard.keysapi import Caller
from tooldock.keys import ApiKey

# The gateway's state for a key (None: the bearer token): `/namespaces`' answer plus, per namespace name,
# `worker_id` (what identifies its current worker) and `image`; and the snapshot's `changed`.
State = Callable[[ApiKey | None], Awaitable[dict[str, Any]]]
EVERY, PING, LIFETIME = 1.0, 15.0, 60.0


@dataclass
class Since:
    """When each namespace's current worker was first seen (generation and time): by worker identity (the
    worker object is kept until the next one replaces it, so its identity cannot be reused meanwhile)."""

    seen: dict[str, tuple[Any, int, float]] = field(default_factory=dict)

    def stamp(self, name: str, worker: Any, generation: int, changed_at: float) -> dict[str, Any]:
        known = self.seen.get(name)
        if known is None or known[0] is not worker:
            # the first sight of a worker: the snapshot it serves in is the change that brought it (exact
            # when the dashboard looks between changes, as its live stream does)
            known = self.seen[name] = (worker, generation, changed_at if known is None else time.time())
        return {"generation": known[1], "at": known[2]}


def shaped(state: dict[str, Any], since: Since) -> dict[str, Any]:
    """The answer: the `worker_id` each namespace carries internally becomes its `since`."""
    changed = state.get("changed") or {}
    namespaces = []
    for ns in state.get("namespaces", []):
        ns = dict(ns)
        worker = ns.pop("worker_id", None)
        if worker is not None:
            ns["since"] = since.stamp(
                ns["name"], worker, int(changed.get("generation", 0)), float(changed.get("at", 0))
            )
        namespaces.append(ns)
    return {**state, "namespaces": namespaces}


def overview_router(state: State, key_of: Caller) -> APIRouter:
    router = APIRouter()
    since = Since()

    @router.get("/overview", summary="The dashboard's overview: namespaces, workers, the last change")
    async def overview(request: Request) -> dict[str, Any]:
        return shaped(await state(key_of(request.scope)), since)

    # Not in the OpenAPI document: a stream that lasts minutes is no operation for generated clients or
    # schemathesis (whose fuzz run read it to its end, LIFETIME, for every example); docs/howto/dashboard.md
    @router.get("/overview/live", include_in_schema=False)
    async def live(request: Request) -> StreamingResponse:
        key = key_of(request.scope)

        async def events() -> AsyncIterator[bytes]:
            last, quiet, ends = "", 0.0, time.monotonic() + LIFETIME
            yield b"retry: 3000\n\n"
            while time.monotonic() < ends and not await request.is_disconnected():
                text = json.dumps(shaped(await state(key), since), separators=(",", ":"), sort_keys=True)
                if text != last:
                    last, quiet = text, 0.0
                    yield f"event: overview\ndata: {text}\n\n".encode()
                elif quiet >= PING:
                    quiet = 0.0
                    yield b": ping\n\n"
                await asyncio.sleep(EVERY)
                quiet += EVERY

        headers = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    return router
