"""The gateway's side of the worker protocol: one connection, many concurrent requests matched by id."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldock.errors import NamespaceUnavailable, ToolDockError, WorkerCrashed, from_worker
from tooldock.namespace.versions import CALL_VERSION
from tooldock.runtime import requestid
from tooldock.worker import protocol
from tooldock.worker.tls import HANDSHAKE_TIMEOUT, TLSFiles, is_network, parse_address

WRITE_BUFFER_HIGH = 1024 * 1024  # bytes queued to a worker before a sender waits for it to read

# Fields that the MCP request being served adds to its worker request: a guard's `inputResponses` and
# `requestState` (runtime/mcp/inputreq.py), for the ops that may answer `input_required`.
round_fields: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("round_fields", default=None)
ROUND_OPS = ("tools.call", "prompts.get", "resources.read")
# Who answers a prompt's or a resource's questions to the client (an McpRelay, set by inputreq.InputRounds;
# a tool call names its relay itself).
round_relay: contextvars.ContextVar[Any] = contextvars.ContextVar("round_relay", default=None)


class ProtocolMismatch(ToolDockError):
    pass


class SecretsDelivered(Exception):
    """The worker asked for its secrets before importing its tools (and got them, when they were ours to
    give): connect again for its ready handshake (see `tooldock.worker.secretenv`)."""


@dataclass(frozen=True)
class SecretEnv:
    """The secret values one worker gets, and the token that names this set of values."""

    values: dict[str, str] = field(default_factory=dict)
    token: str = ""

    def __repr__(self) -> str:  # never print the values
        return f"SecretEnv(names={sorted(self.values)}, token={self.token[:8]}...)"


class _Stream(protocol.LineStream):
    """The connection's lines: the first (the worker's handshake) to `first`, then each to the
    WorkerConnection as it arrives, with no reading task between (one task wake-up a reply less)."""

    def __init__(self) -> None:
        super().__init__(protocol.MAX_LINE_BYTES)
        self.first: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._early: list[bytes] = []  # lines after the handshake, before the WorkerConnection takes them
        self._on_line: Callable[[bytes], None] | None = None
        self._on_lost: Callable[[], None] | None = None

    def attach(self, on_line: Callable[[bytes], None], on_lost: Callable[[], None]) -> None:
        self._on_line, self._on_lost = on_line, on_lost
        early, self._early = self._early, []
        for line in early:
            on_line(line)
        if self.disconnected:
            on_lost()

    def line_received(self, line: bytes) -> None:
        if not self.first.done():
            self.first.set_result(line)
        elif self._on_line is not None:
            self._on_line(line)
        else:
            self._early.append(line)

    def lost(self, exc: Exception | None) -> None:
        if not self.first.done():
            self.first.set_exception(ConnectionResetError("the worker closed the connection before its handshake"))
        if self._on_lost is not None:
            self._on_lost()


async def _connect(address: Path | str, tls: TLSFiles | None) -> _Stream:
    """The connection's stream: over the unix socket, or TCP with mutual TLS (the same protocol on top)."""
    loop = asyncio.get_running_loop()
    stream: _Stream
    if not is_network(address):
        _, stream = await loop.create_unix_connection(_Stream, str(address))
        return stream
    if tls is None:
        raise ToolDockError(f"{address}: a worker on the network needs this gateway's TLS directory (TOOLDOCK_TLS_DIR)")
    host, port = parse_address(str(address))
    # Names are not checked (worker/tls.py): server_hostname only names the peer to the TLS library.
    async with asyncio.timeout(HANDSHAKE_TIMEOUT * 2):  # a host that drops packets: not the OS's minutes
        _, stream = await loop.create_connection(
            _Stream, host, port, ssl=tls.client(), server_hostname=host, ssl_handshake_timeout=HANDSHAKE_TIMEOUT
        )
    return stream


class WorkerConnection:
    def __init__(self, namespace: str, stream: _Stream, handshake: dict[str, Any]) -> None:
        self.namespace = namespace
        self.handshake = handshake
        self._stream = stream
        self._pending: dict[str, asyncio.Future[Any]] = {}
        # Per call: who handles the worker's `event` and `ask` messages for it (a Context tool's relay).
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._event_chains: dict[str, asyncio.Future[Any]] = {}  # per call: its latest event delivery
        self._ids = itertools.count(1)
        self._outbox = protocol.Outbox(stream, WRITE_BUFFER_HIGH)  # a turn's messages in one write
        self.closed = asyncio.Event()
        stream.attach(self._on_line, self._on_lost)

    @classmethod
    async def open(
        cls, namespace: str, socket_path: Path | str, secrets: SecretEnv | None = None, tls: TLSFiles | None = None
    ) -> WorkerConnection:
        """Connect to the worker on `socket_path`, a unix socket, or `tls://HOST:PORT` with `tls`'s client
        certificate (worker/tls.py; the worker verifies it, we verify the worker's), and take its handshake."""
        stream = await _connect(socket_path, tls)
        try:
            handshake = protocol.decode(await stream.first)
        except ConnectionError as exc:
            # Over TLS 1.3 a worker refuses a client certificate after the client's side of the handshake.
            why = " (did it refuse this gateway's certificate? its log says)" if is_network(socket_path) else ""
            raise ProtocolMismatch(f"worker for {namespace!r} closed the connection before its handshake{why}") from exc
        except ValueError as exc:
            stream.close()
            raise ProtocolMismatch(f"worker for {namespace!r} sent an invalid handshake: {exc}") from exc
        if handshake.get("op") == "hello" and handshake.get("needs") == "secrets":
            names = [n for n in handshake.get("names") or [] if isinstance(n, str)]
            if secrets is not None:  # None: not ours to answer; another connection will
                values = {n: v for n, v in secrets.values.items() if n in names}
                with contextlib.suppress(ConnectionError):
                    stream.write(protocol.encode({"op": "secrets", "env": values, "token": secrets.token}))
                    await stream.drain()
            stream.close()
            raise SecretsDelivered(namespace)
        if handshake.get("op") != "ready" or handshake.get("protocol") != protocol.PROTOCOL_VERSION:
            stream.close()
            raise ProtocolMismatch(
                f"worker for {namespace!r} speaks protocol {handshake.get('protocol')!r}, "
                f"this gateway speaks {protocol.PROTOCOL_VERSION}; rebuild the worker with this ToolDock version"
            )
        return cls(namespace, stream, handshake)

    def _on_line(self, line: bytes) -> None:
        try:
            message = protocol.decode(line)
        except ValueError:
            return
        if message.get("op") in ("event", "ask"):
            self._on_message(message)
            return
        future = self._pending.pop(str(message.get("id")), None)
        if future is not None and not future.done():
            future.set_result(message)

    def _on_lost(self) -> None:
        self.closed.set()
        crash = WorkerCrashed(
            f"the worker for namespace {self.namespace!r} exited during the call; it is being restarted, retry the call"
        )
        for future in self._pending.values():
            if not future.done():
                future.set_exception(crash)
        self._pending.clear()

    def _on_message(self, message: dict[str, Any]) -> None:
        """An `event` or `ask` from a running call: hand it to the call's handler; answer every ask."""
        handler = self._handlers.get(str(message.get("id")))
        if message.get("op") == "event":
            if handler is None:
                return
            rid = str(message.get("id"))
            previous = self._event_chains.get(rid)

            async def deliver() -> None:  # in order per call, without holding up the read loop
                if previous is not None:
                    with contextlib.suppress(Exception):
                        await previous
                with contextlib.suppress(Exception):  # the caller went away: the tool carries on
                    await handler(message)

            self._event_chains[rid] = asyncio.ensure_future(deliver())
            return

        async def answer() -> None:
            reply: dict[str, Any] = {"op": "answer", "target": message.get("ask")}
            try:
                if handler is None:
                    raise LookupError("this call cannot ask the client anything")
                reply["result"] = await handler(message) or {}
            except Exception as exc:  # the client refused or is gone: the tool gets an MCP error
                reply["error"] = protocol.refusal(exc)
            await self._send_quietly(reply)

        self._spawn(answer())

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def request(
        self,
        op: str,
        on_message: Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]] | None = None,
        **fields: Any,
    ) -> Any:
        """Send one request and wait for its reply; raises the typed error the worker reported.
        `on_message` receives the call's `event` messages and answers its `ask` messages."""
        extra, relay = round_fields.get(), round_relay.get()
        if extra and op in ROUND_OPS:
            fields.update(extra)
        if op == "tools.call" and (version := CALL_VERSION.get()) is not None:  # FastMCP's `version=` (versions.py)
            fields["version"] = version
        if relay is not None and on_message is None and op in ("prompts.get", "resources.read"):
            fields.update(relay.call_fields())
            on_message = relay.handle
        if self.closed.is_set():  # nothing sent: retrying is safe (a 503, not a crash during the call)
            raise NamespaceUnavailable(f"the worker for namespace {self.namespace!r} is not connected; retry shortly")
        rid = str(next(self._ids))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        if on_message is not None:
            self._handlers[rid] = on_message
        try:
            request_id = requestid.current.get()  # the HTTP request's, for the worker's log lines
            if request_id is not None:
                fields["request_id"] = request_id
            parent = requestid.traceparent.get()
            if parent is not None:
                fields["traceparent"] = parent
            await self._outbox.send(protocol.encode({"id": rid, "op": op, **fields}), alone=len(self._pending) == 1)
            reply = await future
        except asyncio.CancelledError:
            # The caller gave up (timeout or disconnect): tell the worker to stop working on it.
            if self._pending.pop(rid, None) is not None and not self.closed.is_set():
                cancel = asyncio.create_task(self._send_quietly({"op": "cancel", "target": rid}))
                self._background.add(cancel)  # held until sent: the loop keeps only a weak reference
                cancel.add_done_callback(self._background.discard)
            raise
        except ConnectionError as exc:
            self._pending.pop(rid, None)
            raise WorkerCrashed(f"lost the connection to the worker for {self.namespace!r}: {exc}") from exc
        finally:
            self._handlers.pop(rid, None)
            chain = self._event_chains.pop(rid, None)
        if chain is not None:  # the call's progress and log messages reach the client before its result
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(chain), 5)
        if reply.get("ok"):
            return reply.get("result")
        raise from_worker(reply.get("error") or {})

    async def _send_quietly(self, message: dict[str, Any]) -> None:
        try:
            await self._outbox.send(protocol.encode(message))
        except (ConnectionError, RuntimeError):
            pass

    async def close(self) -> None:
        self._stream.close()
        await self.closed.wait()

    def abort(self) -> None:
        """End the connection now, without the goodbyes: a TLS close waits for a silent peer's close_notify
        (up to 30 s). Calls on it fail as on any lost connection and `closed` is set."""
        if self._stream.transport is not None:
            self._stream.transport.abort()
