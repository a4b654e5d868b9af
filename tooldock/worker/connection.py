"""One gateway connection to a worker: each request line is handled as it arrives (a protocol callback,
not a reading task), runs in a task of its own, and its reply goes out through the connection's Outbox."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING, Any

from tooldock.worker import protocol, threadhop

if TYPE_CHECKING:
    from tooldock.worker.server import WorkerServer


class GatewayConnection(protocol.LineStream):
    def __init__(self, worker: WorkerServer) -> None:
        super().__init__(protocol.MAX_LINE_BYTES)
        self.worker = worker
        self.outbox = protocol.Outbox(self, protocol.MAX_LINE_BYTES)  # a turn's replies in one write
        self.tasks: dict[Any, asyncio.Task[None]] = {}  # this connection's requests in flight, by id

    def _line(self, message: dict[str, Any]) -> bytes:
        # secret values never leave the worker, in results, errors or events alike
        line = protocol.encode(self.worker.masker.scrub(message))
        if len(line) <= protocol.MAX_LINE_BYTES:
            return line
        # A line over the limit would end the connection at the gateway, and with it every call in flight
        # on it: the one call fails instead, saying why (an event or a question that big is dropped).
        limit = protocol.MAX_LINE_BYTES
        print(
            f"[{self.worker.namespace}] a message of {len(line)} bytes was not sent: more than the {limit} one may be",
            file=sys.stderr,
            flush=True,
        )
        if "ok" not in message:
            return b""
        why = (
            f"the tool's result is {len(line)} bytes as JSON, more than the {limit // 2**20} MiB one result may "
            "be: return less (a page of it, a summary, or where to find it)"
        )
        return protocol.encode(protocol.error(message.get("id"), "internal_error", why, {"size": len(line)}))

    async def send(self, message: dict[str, Any], alone: bool = False) -> None:
        await self.outbox.send(self._line(message), alone)

    def post(self, message: dict[str, Any]) -> None:
        try:
            self.outbox.post(self._line(message))
        except ConnectionError:
            pass

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.worker.connections.add(self)
        self.post(self.worker.handshake())

    def line_received(self, line: bytes) -> None:
        try:
            request = protocol.decode(line)
        except ValueError as exc:
            self.post(protocol.error(None, "internal_error", f"malformed message: {exc}"))
            return
        op = request.get("op")
        if op == "answer":
            future = self.worker.asks.get(str(request.get("target")))
            if future is not None and not future.done():
                future.set_result(request)
        elif op == "cancel":
            task = self.tasks.get(request.get("target"))
            if task is not None:
                task.cancel()
                self.worker.cancelled.setdefault(task, time.monotonic())  # until it ends: see WorkerServer.abandoned
        else:
            rid = request.get("id")
            label = _label(request)
            task = asyncio.get_running_loop().create_task(self.run(request, label), name=label)
            self.tasks[rid] = task
            self.worker.running.add(task)
            task.add_done_callback(self.worker.ended)

    async def run(self, request: dict[str, Any], label: str = "") -> None:
        rid = request.get("id")
        threadhop.calling.set(label)  # in this task's own context: what the threads it starts run for
        try:
            reply = await self.worker.dispatch(request, self.send)
            if reply is not None:
                try:
                    await self.send(reply, alone=len(self.tasks) == 1)  # the only call in flight: out now
                except (ValueError, TypeError, RecursionError) as exc:  # a result JSON cannot carry
                    message = f"the result could not be sent: {type(exc).__name__}: {exc}"
                    await self.send(protocol.error(rid, "internal_error", message))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if self.tasks.get(rid) is asyncio.current_task():
                del self.tasks[rid]

    def too_long(self) -> None:
        self.post(protocol.error(None, "internal_error", "message too large"))
        super().too_long()

    def close(self) -> None:
        self.outbox.flush()  # what this turn queued goes out before the connection closes
        super().close()

    def lost(self, exc: Exception | None) -> None:
        self.worker.connections.discard(self)
        for task in list(self.tasks.values()):
            task.cancel()


def _label(request: dict[str, Any]) -> str:
    """What a request runs, as the worker's `ping` names it while it runs on after being cancelled."""
    for key in ("tool", "name", "uri"):
        value = request.get(key)
        if isinstance(value, str):
            return value[:200]
    return str(request.get("op"))[:200]
