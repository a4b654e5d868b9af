"""The worker's unix-socket server: one connection per gateway, requests multiplexed by id.

Each request runs in its own task, so a slow tool never blocks `ping` or other calls; fastmcp runs sync
tools in a worker thread. Replies are written whole, one line each, under a lock.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pydantic
from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as FastMCPValidationError

from ..namespace.extract import LoadedNamespace
from . import protocol


def _error_for(exc: Exception) -> tuple[str, str, dict[str, Any] | None]:
    if isinstance(exc, (FastMCPValidationError, pydantic.ValidationError)):
        return "invalid_arguments", str(exc), None
    if isinstance(exc, ImportError):
        return "dependency_error", f"{type(exc).__name__}: {exc}", {"exception": type(exc).__name__}
    if isinstance(exc, TimeoutError):
        return "execution_timeout", f"the tool timed out: {exc}", None
    if isinstance(exc, ToolError):
        return "internal_error", str(exc), {"exception": type(exc).__name__}
    return "internal_error", f"{type(exc).__name__}: {exc}", {"exception": type(exc).__name__}


class WorkerServer:
    def __init__(self, namespace: str, loaded: LoadedNamespace) -> None:
        self.namespace = namespace
        self.loaded = loaded
        self.tasks: dict[tuple[int, Any], asyncio.Task[None]] = {}
        self.stopping = asyncio.Event()

    def handshake(self) -> dict[str, Any]:
        return {
            "op": "ready",
            "protocol": protocol.PROTOCOL_VERSION,
            "namespace": self.namespace,
            "pid": os.getpid(),
            "tools": self.loaded.descriptors,
            "failed_files": [p.to_dict() for p in self.loaded.failed],
        }

    async def call_tool(self, request: dict[str, Any]) -> dict[str, Any]:
        rid, name, arguments = request.get("id"), request.get("tool"), request.get("arguments") or {}
        tool = self.loaded.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return protocol.error(rid, "tool_not_found", f"no tool named {name!r} in namespace {self.namespace!r}")
        if not isinstance(arguments, dict):
            return protocol.error(rid, "invalid_arguments", "arguments must be a JSON object")
        started = time.perf_counter()
        try:
            result = await tool.run(arguments)
        except Exception as exc:  # user code: every failure becomes a protocol error, never a crash
            code, message, details = _error_for(exc)
            print(f"[{self.namespace}] tool {name!r} failed: {message}", file=sys.stderr, flush=True)
            return protocol.error(rid, code, message, details)
        body = {
            "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content],
            "structuredContent": result.structured_content,
            "isError": False,
        }
        return protocol.ok(rid, body, int((time.perf_counter() - started) * 1000))

    async def dispatch(self, request: dict[str, Any]) -> dict[str, Any] | None:
        op, rid = request.get("op"), request.get("id")
        if op == "tools.call":
            return await self.call_tool(request)
        if op == "tools.list":
            return protocol.ok(rid, {"tools": self.loaded.descriptors})
        if op == "tools.get_schema":
            found = next((d for d in self.loaded.descriptors if d["name"] == request.get("tool")), None)
            if found is None:
                return protocol.error(rid, "tool_not_found", f"no tool named {request.get('tool')!r}")
            return protocol.ok(rid, found)
        if op == "ping":
            return protocol.ok(rid, {"pong": True, "pid": os.getpid()})
        if op == "shutdown":
            self.stopping.set()
            return protocol.ok(rid, {"stopping": True})
        return protocol.error(rid, "internal_error", f"unknown op {op!r}; known ops: {sorted(protocol.OPS)}")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock = asyncio.Lock()
        conn = id(writer)

        async def send(message: dict[str, Any]) -> None:
            async with lock:
                writer.write(protocol.encode(message))
                await writer.drain()

        async def run(request: dict[str, Any]) -> None:
            try:
                reply = await self.dispatch(request)
                if reply is not None:
                    await send(reply)
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                self.tasks.pop((conn, request.get("id")), None)

        try:
            await send(self.handshake())
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # longer than the stream limit
                    await send(protocol.error(None, "internal_error", "message too large"))
                    break
                if not line:
                    break
                try:
                    request = protocol.decode(line)
                except ValueError as exc:
                    await send(protocol.error(None, "internal_error", f"malformed message: {exc}"))
                    continue
                if request.get("op") == "cancel":
                    task = self.tasks.get((conn, request.get("target")))
                    if task is not None:
                        task.cancel()
                    continue
                self.tasks[(conn, request.get("id"))] = asyncio.create_task(run(request))
        except (ConnectionError, asyncio.CancelledError):  # the peer left, or the worker is stopping
            pass
        finally:
            for (c, _), task in list(self.tasks.items()):
                if c == conn:
                    task.cancel()
            writer.close()


async def _watch_parent(parent_pid: int, stopping: asyncio.Event) -> None:
    """Exit when the gateway that started us is gone, so a killed gateway leaves no orphan workers."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(1.0)
    stopping.set()


async def serve(namespace: str, loaded: LoadedNamespace, socket_path: Path, parent_pid: int | None = None) -> None:
    worker = WorkerServer(namespace, loaded)
    if parent_pid:
        asyncio.create_task(_watch_parent(parent_pid, worker.stopping))
    socket_path.unlink(missing_ok=True)
    server = await asyncio.start_unix_server(worker.handle, path=str(socket_path), limit=protocol.MAX_LINE_BYTES)
    os.chmod(socket_path, 0o600)
    print(f"[{namespace}] worker ready on {socket_path} with {len(loaded.tools)} tool(s)", file=sys.stderr, flush=True)
    async with server:
        await worker.stopping.wait()
    # Let in-flight calls finish briefly before exiting.
    pending = [t for t in worker.tasks.values() if not t.done()]
    if pending:
        await asyncio.wait(pending, timeout=5)
    socket_path.unlink(missing_ok=True)
