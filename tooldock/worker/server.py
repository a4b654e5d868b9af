"""The worker's unix-socket server: one connection per gateway, requests multiplexed by id.

Each request runs in its own task, so a slow tool never blocks `ping` or other calls; fastmcp runs sync
tools in a worker thread. Replies are whole lines; those of one event-loop turn go out in one write.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastmcp.exceptions import ValidationError as FastMCPValidationError
from mcp.shared.exceptions import MCPError

from tooldock.namespace.extract import LoadedNamespace, own_meta
from tooldock.worker import protocol, quickresult, threadhop
from tooldock.worker.connection import GatewayConnection
from tooldock.worker.failures import argument_errors, cause_of, error_for, innermost, own_timeout, tool_traceback
from tooldock.worker.protocol import round_fields
from tooldock.worker.secretenv import Masker

BRIDGE_MODULE = "tooldock.worker.bridge"  # imports guard.py too
if TYPE_CHECKING:  # the bridge imports FastMCP's server and client stacks: only when first needed
    from tooldock.worker.bridge import Bridge, Relay
    from tooldock.worker.tls import TLSFiles


def _import_bridge() -> None:
    try:
        importlib.import_module(BRIDGE_MODULE)
    except Exception:  # said when the bridge is first used, on the call that needs it
        pass


class WorkerServer:
    def __init__(
        self, namespace: str, loaded: LoadedNamespace, secrets_token: str | None = None, masker: Masker | None = None
    ) -> None:
        self.namespace = namespace
        self.loaded = loaded
        self.secrets_token = secrets_token  # echoed in the handshake: which secret values this worker started with
        self.masker = masker or Masker([])
        self.running: set[asyncio.Task[None]] = set()  # requests in flight, on every connection
        # Requests the gateway cancelled, with when: a task that ignores its cancellation runs on (abandoned()).
        self.cancelled: dict[asyncio.Task[None], float] = {}
        self.connections: set[GatewayConnection] = set()
        self.asks: dict[str, asyncio.Future[dict[str, Any]]] = {}  # our questions to the gateway, by ask id
        self._ask_ids = itertools.count(1)
        self.stopping = asyncio.Event()
        self._bridge: Bridge | None = None

    def ended(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        self.cancelled.pop(task, None)

    def abandoned(self) -> list[dict[str, Any]]:
        """What still runs after the gateway gave up on it: a sync function in its thread (Python cannot stop
        one), or an async one that ignored its cancellation (or blocks the loop: then `ping` is not answered
        at all). The gateway replaces a worker that reports one for too long (runtime/backends/stuck.py)."""
        now = time.monotonic()
        found = [{"call": name, "seconds": round(age, 2), "kind": "thread"} for name, age in threadhop.abandoned()]
        found += [
            {"call": t.get_name(), "seconds": round(now - since, 2), "kind": "task"}
            for t, since in self.cancelled.items()
        ]
        return found

    @property
    def bridge(self) -> Bridge:
        if self._bridge is None:  # built (and imported) on first use: plain tools never need it
            from tooldock.worker.bridge import Bridge

            self._bridge = Bridge(self.namespace, self.loaded)
        return self._bridge

    def warm_bridge(self) -> threading.Thread | None:
        """Import the bridge in a background thread once the worker serves, when the namespace will need it (a
        Context tool, a resource, a prompt), so that its first such call does not pay the import (about 0.3 s
        with bytecode) unless it comes within that time of the start. A worker forked from a fork server has
        it already; a namespace of plain tools never imports it."""
        loaded = self.loaded
        if BRIDGE_MODULE in sys.modules or not (
            loaded.context_tools or loaded.resources or loaded.templates or loaded.prompts
        ):
            return None
        thread = threading.Thread(target=_import_bridge, name="tooldock-warm-bridge", daemon=True)
        thread.start()
        return thread

    def handshake(self) -> dict[str, Any]:
        return {
            "op": "ready",
            "protocol": protocol.PROTOCOL_VERSION,
            "namespace": self.namespace,
            "pid": os.getpid(),
            "tools": self.loaded.descriptors,
            **({"inlined_tools": list(self.loaded.inlined.values())} if self.loaded.inlined else {}),
            **({"tool_versions": self.loaded.older_versions()} if self.loaded.versions else {}),
            "plain_tools": sorted(set(self.loaded.tools) - self.loaded.context_tools),
            "asking_tools": sorted(self.loaded.asking_tools),
            **self.loaded.surface(),
            "failed_files": [p.to_dict() for p in self.loaded.failed],
            **({"secrets_token": self.secrets_token} if self.secrets_token else {}),
        }

    def relay(self, request: dict[str, Any], send: Any) -> Relay:
        """How a Context tool (a prompt, a resource) reaches the caller: events and asks on this connection,
        tied to the request's id, with what its client supports and a guard's rounds from the request."""
        rid, client = request.get("id"), request.get("client")

        async def event(kind: str, data: dict[str, Any]) -> None:
            await send({"op": "event", "id": rid, "event": kind, "data": data})

        async def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
            ask_id = f"a{next(self._ask_ids)}"
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self.asks[ask_id] = future
            try:
                await send({"op": "ask", "id": rid, "ask": ask_id, "method": method, "params": params})
                answer = await future
            finally:
                self.asks.pop(ask_id, None)
            if "error" in answer:
                error = answer["error"] if isinstance(answer["error"], dict) else {}
                raise MCPError(int(error.get("code", -32603)), str(error.get("message", "the client refused")))
            return answer.get("result") or {}

        from tooldock.worker.bridge import Relay
        from tooldock.worker.callcontext import request_of

        relay = Relay(event, ask, client if isinstance(client, dict) else {})
        relay.rounds = round_fields(request)
        relay.scope = protocol.scope_of(request)
        relay.visibility = protocol.visibility_of(request)
        relay.request = request_of(request)
        relay.state = protocol.state_of(request)
        return relay

    async def call_tool(self, request: dict[str, Any], send: Any) -> dict[str, Any]:
        rid, name, arguments = request.get("id"), request.get("tool"), request.get("arguments") or {}
        tool = self.loaded.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return protocol.error(rid, "tool_not_found", f"no tool named {name!r} in namespace {self.namespace!r}")
        if not isinstance(arguments, dict):
            return protocol.error(rid, "invalid_arguments", "arguments must be a JSON object")
        started = time.perf_counter()
        version = request.get("version")
        if isinstance(version, str) and version != str(tool.version):  # an older version: fastmcp's server picks it
            if version not in self.loaded.versions.get(tool.name, {}):
                return protocol.error(rid, "tool_not_found", f"tool {name!r} has no version {version!r}")
            return await self.call_context_tool(request, send, started)
        if name in self.loaded.context_tools:
            return await self.call_context_tool(request, send, started)
        try:
            result = await quickresult.run(tool, arguments)  # a plain value comes back as its body
        # User code: every failure becomes a protocol error, never a crash. SystemExit too: a tool that calls
        # sys.exit() (argparse on bad arguments, a CLI's main() wrapped as a tool) fails its call, and the
        # worker serves on instead of exiting with every other call in flight.
        except (Exception, SystemExit) as exc:
            code, message, details = error_for(own_timeout(exc, tool))
            self._failed(name, request, message)
            if details is not None:  # the gateway passes it on only to callers who ask (the manager's test_tool)
                details["traceback"] = tool_traceback(exc, self.loaded.folder)
            return protocol.error(rid, code, message, details)
        body = result if isinstance(result, dict) else result_body(result)
        if body["isError"]:  # logged as a Context tool's is
            text = protocol.error_text(body)
            self._failed(name, request, text)
        return protocol.ok(rid, body, int((time.perf_counter() - started) * 1000))

    def _failed(self, name: Any, request: dict[str, Any], why: str) -> None:
        """A failed call's line in the worker's log (the gateway logs its own)."""
        print(f"[{self.namespace}] tool {name!r} failed{_for(request)}: {why}", file=sys.stderr, flush=True)

    async def call_context_tool(self, request: dict[str, Any], send: Any, started: float) -> dict[str, Any]:
        rid, name, version = request.get("id"), str(request.get("tool")), request.get("version")
        relay = self.relay(request, send)
        level = request.get("logLevel") if isinstance(request.get("logLevel"), str) else None
        from tooldock.worker.guard import CALL_FAILURES  # loaded with the bridge, not by plain workers

        failures: list[BaseException] = []
        CALL_FAILURES.set(failures)
        try:
            body = await self.bridge.call_tool(
                name,
                request.get("arguments") or {},
                relay,
                bool(request.get("progress")),
                level,
                version,
            )
        except MCPError as err:  # the tool raised it (as fastmcp would send it), or the session refused
            _, message, data = error_for(err)
            code = "invalid_arguments" if err.error.code == -32602 else "internal_error"
            return protocol.error(rid, code, message, data)
        except Exception as exc:  # the session itself failed: report, never crash the worker
            code, message, details = error_for(innermost(exc))
            print(f"[{self.namespace}] tool {name!r} failed{_for(request)}:", file=sys.stderr, flush=True)
            traceback.print_exc(file=sys.stderr)
            return protocol.error(rid, code, message, details)
        if protocol.INPUT_REQUIRED in (body.get("_meta") or {}) and not isinstance(request.get("client"), dict):
            # A guard's InputRequiredResult on a call with no MCP client behind it (REST, the relay socket).
            message = f"tool {name!r} asks the client for input; this call has no MCP client to ask: call it over MCP"
            return protocol.error(rid, "internal_error", message)
        if body.get("isError"):
            # the version that ran: its own `@tool(timeout=...)`
            ran = self.loaded.versions.get(name, {}).get(version) if isinstance(version, str) else None
            late = own_timeout(cause_of(failures[-1]), ran or self.loaded.tools.get(name)) if failures else None
            if isinstance(late, TimeoutError):  # answered as a plain tool's own time limit is
                code, text, _ = error_for(late)
                self._failed(name, request, text)
                return protocol.error(rid, code, text)
            invalid = next((f for f in reversed(failures) if isinstance(f, FastMCPValidationError)), None)
            text = argument_errors(invalid) if invalid is not None else protocol.error_text(body)
            self._failed(name, request, text)
            if invalid is not None:  # logged and answered as a plain tool's bad arguments are
                return protocol.error(rid, "invalid_arguments", text)
            if not failures:  # no exception: the tool returned `ToolResult(is_error=True)`, passed on as it is
                return protocol.ok(rid, body, int((time.perf_counter() - started) * 1000))
            # The tool raised: its traceback, as a plain tool's failure gives (the gateway drops it).
            failed = cause_of(failures[-1])
            details = {"exception": type(failed).__name__, "traceback": tool_traceback(failed, self.loaded.folder)}
            return protocol.error(rid, "internal_error", text or f"tool {name!r} failed", details)
        return protocol.ok(rid, body, int((time.perf_counter() - started) * 1000))

    async def mcp_op(self, request: dict[str, Any], send: Any = None) -> dict[str, Any]:
        """resources.read, prompts.get, completion.complete: MCP results from the bridge. A prompt or a
        resource that asks the client (`ctx.elicit()`, sampling, roots) is relayed as a Context tool is."""
        op, rid = request.get("op"), request.get("id")
        relay = self.relay(request, send)
        try:
            if op == "resources.read":
                uri = request.get("uri")
                if not isinstance(uri, str) or not uri:
                    return protocol.error(rid, "invalid_arguments", "resources.read needs a 'uri' string")
                return protocol.ok(rid, await self.bridge.read_resource(uri, relay))
            if op == "prompts.get":
                name, arguments = request.get("name"), request.get("arguments")
                if not isinstance(name, str) or name not in self.loaded.prompts:
                    known = ", ".join(sorted(self.loaded.prompts)) or "none"
                    message = f"no prompt named {name!r} in namespace {self.namespace!r}; available: {known}"
                    return protocol.error(rid, "not_found", message)
                if arguments is not None and not isinstance(arguments, dict):
                    return protocol.error(rid, "invalid_arguments", "prompt arguments must be a JSON object of strings")
                return protocol.ok(rid, await self.bridge.get_prompt(name, arguments, relay))
            ref, argument = request.get("ref"), request.get("argument")
            if not isinstance(ref, dict) or not isinstance(argument, dict):
                return protocol.error(
                    rid, "invalid_arguments", "completion.complete needs 'ref' and 'argument' objects"
                )
            return protocol.ok(rid, self.bridge.complete(ref, argument))
        except MCPError as err:
            missing = err.error.code in (-32002, -32602) and op == "resources.read"
            return protocol.error(rid, "not_found" if missing else "internal_error", err.error.message)
        except Exception as exc:  # user code
            code, message, details = error_for(innermost(exc))
            traceback.print_exc(file=sys.stderr)
            return protocol.error(rid, code, message, details)

    async def dispatch(self, request: dict[str, Any], send: Any = None) -> dict[str, Any] | None:
        op, rid = request.get("op"), request.get("id")
        if op == "tools.call":
            return await self.call_tool(request, send)
        if op in ("resources.read", "prompts.get", "completion.complete"):
            return await self.mcp_op(request, send)
        if op == "tools.list":
            return protocol.ok(rid, {"tools": self.loaded.descriptors})
        if op == "visibility.hidden":  # what a session's rules hide of this namespace (visibility.py)
            from tooldock.worker.visibility import hidden_by  # here: a namespace of plain tools never needs it

            return protocol.ok(rid, await hidden_by(self.loaded, protocol.visibility_of(request)))
        if op == "tools.get_schema":
            found = next((d for d in self.loaded.descriptors if d["name"] == request.get("tool")), None)
            if found is None:
                return protocol.error(rid, "tool_not_found", f"no tool named {request.get('tool')!r}")
            return protocol.ok(rid, found)
        if op == "ping":
            return protocol.ok(rid, {"pong": True, "pid": os.getpid(), "abandoned": self.abandoned()})
        if op == "shutdown":
            self.stopping.set()
            return protocol.ok(rid, {"stopping": True})
        return protocol.error(rid, "internal_error", f"unknown op {op!r}; known ops: {sorted(protocol.OPS)}")


def result_body(result: Any) -> dict[str, Any]:
    """A fastmcp `ToolResult` as a call's result body (quickresult.body gives the same for a plain value)."""
    body = {
        "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content],
        "structuredContent": result.structured_content,
        "isError": bool(result.is_error),  # a `ToolResult(is_error=True)`: the tool's own failure, as it words it
    }
    if result.meta and (meta := own_meta(result.meta)):  # a ToolResult's `meta`, as FastMCP serves it
        body["_meta"] = meta
    return body


def _for(request: dict[str, Any]) -> str:
    """` (request <id>)` when the gateway named the client request this call serves (`X-Request-Id`)."""
    found, parent = request.get("request_id"), request.get("traceparent")
    named = f"request {found}" if isinstance(found, str) and found.isprintable() and len(found) <= 128 else ""
    if isinstance(parent, str) and len(parent) == 55 and parent.count("-") == 3:  # W3C: version-trace-span-flags
        named = f"{named}, trace {parent.split('-')[1]}".lstrip(", ")
    return f" ({named})" if named else ""


async def _watch_parent(parent_pid: int, stopping: asyncio.Event) -> None:
    """Exit when the gateway that started us is gone, so a killed gateway leaves no orphan workers."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(1.0)
    stopping.set()


async def serve(
    namespace: str,
    loaded: LoadedNamespace,
    socket_path: Path | None,
    parent_pid: int | None = None,
    secrets_token: str | None = None,
    masker: Masker | None = None,
    listen: tuple[str, int] | None = None,
    tls_files: TLSFiles | None = None,
) -> None:
    """Serve on the unix socket (None: none), and on `listen` over mutual TLS with `tls_files` (tcp.py)."""
    worker = WorkerServer(namespace, loaded, secrets_token, masker)
    # Held for the worker's lifetime: the event loop keeps only a weak reference to a task.
    watcher = asyncio.create_task(_watch_parent(parent_pid, worker.stopping)) if parent_pid else None
    servers: list[asyncio.AbstractServer] = []
    where: list[str] = []
    listener = None
    if socket_path is not None:
        socket_path.unlink(missing_ok=True)
        loop = asyncio.get_running_loop()
        servers.append(await loop.create_unix_server(lambda: GatewayConnection(worker), str(socket_path)))
        os.chmod(socket_path, 0o600)
        where.append(str(socket_path))
    if listen is not None:
        from tooldock.worker.tcp import TLSListener  # a worker on the unix socket alone never needs it

        assert tls_files is not None
        listener = TLSListener(worker, tls_files)
        await listener.start(*listen)
        where.append(listener.address())
    print(
        f"[{namespace}] {protocol.READY_LINE} {' and '.join(where)} with {len(loaded.tools)} tool(s)",
        file=sys.stderr,
        flush=True,
    )
    worker.warm_bridge()
    try:
        async with contextlib.AsyncExitStack() as stack:
            for server in servers:
                await stack.enter_async_context(server)
            await worker.stopping.wait()
        # Let in-flight calls finish briefly before exiting.
        pending = [t for t in worker.running if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=5)
    finally:
        if listener is not None:
            await listener.close()
        for connection in list(worker.connections):
            connection.close()
        if watcher is not None:
            watcher.cancel()
        if socket_path is not None:
            socket_path.unlink(missing_ok=True)
