"""The worker's TCP listener: the worker protocol over mutual TLS, for gateways on other hosts.

A TCP connection is read from by nothing until its TLS handshake has completed: the accepted socket goes
to TLS at once (`loop.connect_accepted_socket`, with the TLS directory's context as it is now:
`worker/tls.py`), and only once the handshake has completed is it handed to a `GatewayConnection`, the
same one a unix-socket connection gets, so requests, ids, cancellation, events and asks are the socket's,
byte for byte. A peer that fails the handshake (no
certificate, one of another CA, an expired one, not TLS at all, too slow) is closed and named in one line
on stderr, and the worker serves on.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import TYPE_CHECKING, Any

from tooldock.worker import tls
from tooldock.worker.connection import GatewayConnection

if TYPE_CHECKING:
    from tooldock.worker.server import WorkerServer

MAX_HANDSHAKING = 64  # TCP connections at once still in their TLS handshake; more are closed at once
BACKLOG = 128


class TLSListener:
    """`host:port` served over mutual TLS with the TLS directory's certificates, for `worker`. Connections
    are accepted here, on a socket of our own, so that each is handed to TLS before a byte of it is read
    (`loop.connect_accepted_socket`), with the context the directory's files give now."""

    def __init__(self, worker: WorkerServer, files: tls.TLSFiles) -> None:
        self.worker, self.files = worker, files
        self.socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._handshaking: set[asyncio.Task[None]] = set()
        self.refused = 0  # connections refused since the start

    async def start(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self.socket.setblocking(False)
        self._accepting = asyncio.get_running_loop().create_task(self._accept(self.socket), name="tls-accept")

    def address(self) -> str:
        """The address gateways connect to, `tls://HOST:PORT` (the port bound when 0 was asked)."""
        assert self.socket is not None
        host, port = self.socket.getsockname()[:2]
        return f"{tls.SCHEME}[{host}]:{port}" if ":" in host else f"{tls.SCHEME}{host}:{port}"

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, peer = await loop.sock_accept(listening)
            except OSError as exc:  # out of descriptors, a connection reset while queued: go on
                print(
                    f"[{self.worker.namespace}] accepting a TCP connection failed: {exc}", file=sys.stderr, flush=True
                )
                await asyncio.sleep(0.1)
                continue
            where = _peer(peer)
            # Each reply is one small TLS record: sent now, not held back for an ACK (Nagle's algorithm)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if len(self._handshaking) >= MAX_HANDSHAKING:
                self._refuse(where, f"more than {MAX_HANDSHAKING} connections in their TLS handshake")
                connection.close()
                continue
            task = loop.create_task(self._handshake(connection, where))
            self._handshaking.add(task)
            task.add_done_callback(self._handshaking.discard)

    async def _handshake(self, connection: socket.socket, peer: str) -> None:
        """TLS on the accepted socket; the GatewayConnection is made (and greets the gateway) only once the
        handshake has completed, with the peer's certificate verified."""
        loop = asyncio.get_running_loop()
        try:
            context = self.files.server()  # read again when a file changed: a rotated trust bundle applies now
            transport, _ = await loop.connect_accepted_socket(
                lambda: GatewayConnection(self.worker),
                connection,
                ssl=context,
                ssl_handshake_timeout=tls.HANDSHAKE_TIMEOUT,
            )
        except (OSError, ValueError, TimeoutError, ConnectionError) as exc:  # ssl.SSLError is an OSError
            self._refuse(peer, tls.refusal_reason(exc))
            connection.close()
            return
        subject = _subject(transport.get_extra_info("peercert"))
        print(f"[{self.worker.namespace}] gateway {subject} connected from {peer} (TLS)", file=sys.stderr, flush=True)

    def _refuse(self, peer: str, why: str) -> None:
        self.refused += 1
        print(f"[{self.worker.namespace}] refused a connection from {peer}: {why}", file=sys.stderr, flush=True)

    async def close(self) -> None:
        """Stop accepting (the connections made go on until the worker closes them)."""
        for task in [self._accepting, *self._handshaking]:
            if task is not None:
                task.cancel()
        if self.socket is not None:
            self.socket.close()


def _peer(found: Any) -> str:
    if isinstance(found, tuple) and len(found) >= 2:
        host, port = found[0], found[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return "an unknown peer"


def _subject(cert: Any) -> str:
    """A verified peer certificate's common name (what `tooldock cluster cert --name` gave it)."""
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return repr(str(value)[:100])
    return "(no name)"
