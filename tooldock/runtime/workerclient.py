"""The gateway's side of the worker protocol: one connection, many concurrent requests matched by id."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from ..errors import ToolDockError, WorkerCrashed, from_worker
from ..worker import protocol


class ProtocolMismatch(ToolDockError):
    pass


class WorkerConnection:
    def __init__(self, namespace: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handshake: dict[str, Any]) -> None:
        self.namespace = namespace
        self.handshake = handshake
        self._reader, self._writer = reader, writer
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._write_lock = asyncio.Lock()
        self.closed = asyncio.Event()
        self._reader_task = asyncio.create_task(self._read_loop())

    @classmethod
    async def open(cls, namespace: str, socket_path: Path) -> WorkerConnection:
        reader, writer = await asyncio.open_unix_connection(str(socket_path), limit=protocol.MAX_LINE_BYTES)
        try:
            handshake = protocol.decode(await reader.readline())
        except ValueError as exc:
            writer.close()
            raise ProtocolMismatch(f"worker for {namespace!r} sent an invalid handshake: {exc}") from exc
        if handshake.get("op") != "ready" or handshake.get("protocol") != protocol.PROTOCOL_VERSION:
            writer.close()
            raise ProtocolMismatch(
                f"worker for {namespace!r} speaks protocol {handshake.get('protocol')!r}, "
                f"this gateway speaks {protocol.PROTOCOL_VERSION}; rebuild the worker with this ToolDock version"
            )
        return cls(namespace, reader, writer, handshake)

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    message = protocol.decode(line)
                except ValueError:
                    continue
                future = self._pending.pop(str(message.get("id")), None)
                if future is not None and not future.done():
                    future.set_result(message)
        except (ConnectionError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.set()
            crash = WorkerCrashed(
                f"the worker for namespace {self.namespace!r} exited during the call; "
                "it is being restarted, retry the call"
            )
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(crash)
            self._pending.clear()

    async def request(self, op: str, **fields: Any) -> Any:
        """Send one request and wait for its reply; raises the typed error the worker reported."""
        if self.closed.is_set():
            raise WorkerCrashed(f"the worker for namespace {self.namespace!r} is not connected")
        rid = str(next(self._ids))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            async with self._write_lock:
                self._writer.write(protocol.encode({"id": rid, "op": op, **fields}))
                await self._writer.drain()
            reply = await future
        except asyncio.CancelledError:
            # The caller gave up (timeout or disconnect): tell the worker to stop working on it.
            if self._pending.pop(rid, None) is not None and not self.closed.is_set():
                asyncio.create_task(self._send_quietly({"op": "cancel", "target": rid}))
            raise
        except ConnectionError as exc:
            self._pending.pop(rid, None)
            raise WorkerCrashed(f"lost the connection to the worker for {self.namespace!r}: {exc}") from exc
        if reply.get("ok"):
            return reply.get("result")
        raise from_worker(reply.get("error") or {})

    async def _send_quietly(self, message: dict[str, Any]) -> None:
        try:
            async with self._write_lock:
                self._writer.write(protocol.encode(message))
                await self._writer.drain()
        except (ConnectionError, RuntimeError):
            pass

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass
        self._reader_task.cancel()
