"""The relay client behind `tooldock relay`: an MCP server on stdio (the official SDK) whose tools are the
ones an API key may use through the relay socket (seed 002's oubliette-client).

It asks the socket for the key's tools (`oubliette_tools`) at start and again on every `tools/list`, and
registers each as `<prefix><name>` with its schemas; each call is forwarded (`oubliette_call_tool`, the key
with it) and its result relayed as it is. It also asks to be told when they change (`tooldock_watch_tools`,
a gateway of this version or later: a reload, an upstream server's new list, the key revoked or expired)
and then tells its client at once (`--watch` also asks on a timer, for an older gateway). A socket it
cannot reach or a key it is refused leaves a warning on stderr and no tools (or, for a socket gone for a
moment, the last list), never a crash. The key is sent only to the socket: never printed, logged or put in
an error.
Light on imports (it runs in sandbox images): the SDK's server side, anyio and the relay's wire format.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

import tooldock
from tooldock.runtime.relay.protocol import CALL, LIST_CHANGED, METHOD_NOT_FOUND, TOOLS, WATCH, decode, encode

LINE_LIMIT = 64 * 1024 * 1024  # answers can be large (a tool's whole result on one line)
LIST_TIMEOUT = 30.0
RESUBSCRIBE = 5.0  # seconds between attempts to watch again after the socket went away (with --watch 0)


class RelayError(Exception):
    """The socket answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def __str__(self) -> str:
        reason = self.data.get("reason") if isinstance(self.data, dict) else None
        return f"{self.message} ({self.code}){f': {reason}' if reason else ''}"


class SocketClient:
    """One connection to the relay socket, requests multiplexed by id; it reconnects after a drop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self.connects = 0  # connections made so far (a watch lasts as long as its connection)
        self.events: asyncio.Queue[str] = asyncio.Queue()  # the socket's notifications, and "closed"

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        async with self._lock:
            if self._writer is None or self._writer.is_closing():
                reader, self._writer = await asyncio.open_unix_connection(str(self.path), limit=LINE_LIMIT)
                self._reading = asyncio.ensure_future(self._read(reader))
                self.connects += 1
            rid = next(self._ids)
            answer = self._pending[rid] = asyncio.get_running_loop().create_future()
            self._writer.write(encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
            await self._writer.drain()
        try:
            return await answer
        finally:
            self._pending.pop(rid, None)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        failure: Exception = ConnectionError(f"the relay socket {self.path} closed the connection")
        try:
            while line := await reader.readline():
                try:
                    message = decode(line)
                except Exception:
                    continue  # not JSON: nothing to match it to
                rid = message.get("id") if isinstance(message, dict) else None
                if rid is None and isinstance(message, dict) and isinstance(message.get("method"), str):
                    self.events.put_nowait(message["method"])  # a notification
                    continue
                answer = self._pending.get(rid) if isinstance(rid, int) else None
                if answer is None or answer.done():
                    continue
                if isinstance(message.get("error"), dict):
                    error = message["error"]
                    answer.set_exception(RelayError(error.get("code", 0), str(error.get("message")), error.get("data")))
                else:
                    answer.set_result(message.get("result"))
        except (OSError, ValueError) as exc:
            failure = ConnectionError(f"the relay socket {self.path} failed: {exc}")
        finally:
            self.events.put_nowait("closed")
            if self._writer is not None:
                self._writer.close()
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(failure)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reading


def warn(message: str) -> None:
    print(f"tooldock relay: warning: {message}", file=sys.stderr, flush=True)


class KeyTools:
    """The tools the key may use, as registered here (`<prefix><name>`), asked of the socket again on every
    `tools/list` and before refusing a name it does not know: a tool added since shows up, and a key revoked
    since lists none. When the socket cannot be reached, the last list stays. Each warning is printed once
    until the situation changes."""

    def __init__(self, client: SocketClient, key: str | None, prefix: str) -> None:
        self.client, self.key, self.prefix = client, key, prefix
        self.registered: dict[str, types.Tool] = {}
        self.session: Any = None  # the client's session, once it has listed: told when the list changes
        self._said: str | None = None  # the last warning about the socket or the key, until things are well
        self._skipped: set[str] = set()  # invalid descriptors already reported
        self.watched_on = 0  # the connection (SocketClient.connects) the socket was asked to watch on; 0: none
        self.pushes = True  # False once the gateway said it has no tooldock_watch_tools (an older one)

    def _warn(self, message: str) -> None:
        if message != self._said:
            warn(message)
        self._said = message

    async def refresh(self) -> None:
        if not self.key:
            self._warn("no API key: set TOOLDOCK_API_KEY (or OUBLIETTE_API_KEY); serving no tools")
            return
        try:
            answer = await asyncio.wait_for(self.client.request(TOOLS, {"api_key": self.key}), LIST_TIMEOUT)
        except RelayError as err:
            self.registered = {}
            self._warn(f"the relay refused the key: {err}; serving no tools")
            return
        except (OSError, TimeoutError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc) or "no answer in time"
            kept = f"; keeping the {len(self.registered)} tool(s) listed before" if self.registered else ""
            self._warn(f"cannot reach the relay socket {self.client.path}: {reason}{kept or '; serving no tools'}")
            return
        tools = answer.get("tools") if isinstance(answer, dict) else None
        if not isinstance(tools, list):
            self._warn("the relay's answer has no tool list; serving no tools")
            self.registered = {}
            return
        registered: dict[str, types.Tool] = {}
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            try:
                named = self.prefix + tool["name"]
                registered[named] = types.Tool.model_validate({**tool, "name": named})
            except ValueError as exc:
                if tool["name"] not in self._skipped:
                    self._skipped.add(tool["name"])
                    warn(f"skipping tool {tool['name']!r}: its descriptor is not a valid MCP tool ({exc})")
        self.registered, self._said = registered, None
        if self.pushes and self.watched_on != self.client.connects:  # a new connection: watch again
            await self.subscribe()

    async def subscribe(self) -> None:
        """Ask the socket to announce changes to the key's tools on this connection (`watching` says if it
        did)."""
        if not self.key or not self.pushes:
            return
        try:
            await asyncio.wait_for(self.client.request(WATCH, {"api_key": self.key}), LIST_TIMEOUT)
        except RelayError as err:
            if err.code == METHOD_NOT_FOUND:
                self.pushes = False  # an older gateway: --watch's timer is the only way to learn
            return
        except (OSError, TimeoutError):
            return
        self.watched_on = self.client.connects

    @property
    def watching(self) -> bool:
        return self.watched_on == self.client.connects and self.client.connected


def build_server(client: SocketClient, tools: KeyTools) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tools.session = ctx.session
        await tools.refresh()
        return types.ListToolsResult(tools=list(tools.registered.values()))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in tools.registered:
            await tools.refresh()  # added since the client listed?
        if params.name not in tools.registered:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        name = params.name.removeprefix(tools.prefix)
        try:
            arguments = params.arguments or {}
            result = await client.request(CALL, {"api_key": tools.key, "tool": name, "arguments": arguments})
            return types.CallToolResult.model_validate(result)
        except RelayError as err:
            text = f"relay refused {name}: {err}"
        except OSError as exc:
            text = f"relay socket {client.path} unreachable: {getattr(exc, 'strerror', None) or exc}"
        except ValueError as exc:
            text = f"the relay's answer is not a tool result: {exc}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    return Server(
        "tooldock-relay",
        version=tooldock.__version__,
        description="ToolDock's tools through the relay socket, as this sandbox's API key allows",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def watch(tools: KeyTools, every: float) -> None:
    """Ask the socket again when it says the key's tools changed, and every `every` seconds (0: never; but
    every RESUBSCRIBE seconds while the socket is not watching, to watch again once it is back); when the
    key's tools changed (names or descriptors), tell the client (`notifications/tools/list_changed`, which
    it answers by listing again)."""
    while True:
        timeout = every if every > 0 else (None if tools.watching or not tools.pushes else RESUBSCRIBE)
        try:
            event = await asyncio.wait_for(tools.client.events.get(), timeout)
        except TimeoutError:
            event = "timer"
        if event not in (LIST_CHANGED, "timer"):
            continue  # "closed": the next refresh reconnects and watches again
        before = tools.registered
        await tools.refresh()
        if tools.registered != before and tools.session is not None:  # a tool added, removed or changed
            with contextlib.suppress(Exception):  # the client is gone: the server's own loop ends
                await tools.session.send_tool_list_changed()


async def serve(path: Path, prefix: str, key: str | None, every: float = 0) -> None:
    client = SocketClient(path)
    try:
        tools = KeyTools(client, key, prefix)
        await tools.refresh()
        if tools.registered:
            print(f"tooldock relay: {len(tools.registered)} tool(s) from {path}", file=sys.stderr, flush=True)
        server = build_server(client, tools)
        announced = every > 0 or tools.watching  # a client told the list changes (MCP's listChanged)
        tools.pushes = tools.pushes and announced  # no watch loop to hear the socket's announcements
        options = server.create_initialization_options(NotificationOptions(tools_changed=announced))
        async with stdio_server() as (read, write), anyio.create_task_group() as group:
            if announced and key:
                group.start_soon(watch, tools, every)
            await server.run(read, write, options)
            group.cancel_scope.cancel()
    finally:
        await client.close()


def run(path: Path, prefix: str, key: str | None, every: float = 0) -> None:
    anyio.run(serve, path, prefix, key, every)
