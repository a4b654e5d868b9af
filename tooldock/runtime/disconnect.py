"""A request whose client goes away: the hooks the gateway's HTTP protocol (http/wire.py) runs then, and the
block that stops its work for nobody. Below the front ends, so REST and MCP handlers both use it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from starlette.requests import ClientDisconnect

# In each request's scope: a list of callables run when the client goes away before its answer is complete.
# A handler that would otherwise work on for nobody (hotrest: a REST call's tool) adds one that stops it.
ON_DISCONNECT = "tooldock.on_disconnect"
# In each request's scope on the gateway's HTTP protocol: closes the request's connection.
CLOSE_CONNECTION = "tooldock.close_connection"


def hang_up(scope: Any) -> None:
    """End a request as if its client had gone (its answer ended or not): the handlers' disconnect hooks run
    and, on the gateway's own HTTP protocol, its connection is closed, so what still reads the request sees
    `http.disconnect` (an MCP event stream ends as when its client leaves)."""
    for hook in list(scope.get(ON_DISCONNECT) or ()):
        hook()
    close = scope.get(CLOSE_CONNECTION)
    if close is not None:
        close()


@contextlib.contextmanager
def cancelled_on_disconnect(scope: Any) -> Iterator[None]:
    """While the block runs, a client that goes away cancels it (as an MCP client's notifications/cancelled
    cancels a call: a worker call in it tells the worker to stop), and the block ends in ClientDisconnect,
    which the request edge logs as one quiet line. Nothing is watched when the server is not the gateway's."""
    hooks, task, gone = scope.get(ON_DISCONNECT), asyncio.current_task(), []
    if hooks is None or task is None:
        yield
        return

    def stop() -> None:
        gone.append(True)
        task.cancel()

    hooks.append(stop)
    try:
        yield
    except asyncio.CancelledError:
        if not gone:
            raise
        task.uncancel()
        raise ClientDisconnect() from None
    finally:
        hooks.remove(stop)
