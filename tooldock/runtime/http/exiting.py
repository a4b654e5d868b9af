"""Running uvicorn's server so that the process ends once the server has stopped, without waiting for DNS lookups
nobody awaits any more.

uvicorn's `Server.run` is `asyncio.run`: when the server has stopped (the app's lifespan over: workers stopped,
the state store closed, traces flushed), the event loop is closed, and closing waits for every request the loop
still has outstanding. A DNS lookup (getaddrinfo, on a thread pool: libuv's four threads under uvloop, the
default executor under asyncio) cannot be taken back once queued, and when DNS does not answer each takes the
resolver's whole timeout (glibc's: 5 s, twice). A caller that gives up earlier leaves its lookup behind: the
state store's reconnects (a 1 s connect timeout, a new attempt every 1.5 s per subscription) queue about two a
second while Redis's name does not resolve.

That is what `docker stack rm` does to a gateway on Docker Swarm: the stack's networks go first, Docker's DNS
forwards the names it no longer knows (`redis`, `tasks.ns-...`) to an upstream that does not answer, and a
gateway done serving 5 s after its SIGTERM waited some 40 s more for its queued lookups, until Swarm killed it
at the end of its stop_grace_period (measured: `tooldock swarm down` 55 s, the gateways' tasks the last to go).

So here the loop is closed as usual, but if that has not finished `CLOSE_WAIT` seconds after the server stopped,
the process flushes its logs and ends (`os._exit`) without waiting for the rest.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

CLOSE_WAIT = 2.0  # seconds the event loop may take to close after the server stopped

log = logging.getLogger("tooldock.http")


def run(server: uvicorn.Server, sockets: list[socket.socket]) -> None:
    """`server.run(sockets)` (uvicorn's own, on Python 3.11: asyncio.Runner with the configured loop), with the
    loop's closing bounded as the module says."""
    watchdog: threading.Timer | None = None
    try:
        with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
            try:
                runner.run(server.serve(sockets=sockets))
            finally:  # leaving the `with` closes the loop
                failed = sys.exc_info()[0] not in (None, KeyboardInterrupt)
                watchdog = threading.Timer(CLOSE_WAIT, _end_now, (1 if failed else 0,))
                watchdog.daemon = True
                watchdog.start()
    finally:
        if watchdog is not None:
            watchdog.cancel()


def _end_now(code: int) -> None:
    log.warning(
        "the event loop has not closed %.0f s after the server stopped (DNS lookups nobody awaits, still "
        "waiting for an answer); exiting without them",
        CLOSE_WAIT,
    )
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
