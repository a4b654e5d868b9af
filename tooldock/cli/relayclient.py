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
A call's Context tool progress and log messages reach the client as that call's own notifications: the
call asks the socket for them (its `_meta`, events.py of the relay) and the connection (relaysocket.py)
hands them back. The tool's questions (sampling, elicitation, roots) go to the client as that call's own
requests, for what the client declared it answers (asks.py of the relay), and its answers go back.
What the client activates in an upstream namespace is applied again on a new connection (relayviews.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

import tooldock
from tooldock.cli.relaysocket import Notice, RelayError, SocketClient
from tooldock.cli.relayviews import ACTIVATED, Activations
from tooldock.namespace.versions import FASTMCP_META, asked_version, version_refusal
from tooldock.runtime.questions import ask_session, declared
from tooldock.runtime.relay.protocol import (
    CALL,
    CAN_ANSWER,
    LIST_CHANGED,
    LOG_LEVEL,
    MESSAGE,
    METHOD_NOT_FOUND,
    PROGRESS,
    TOOLS,
    WATCH,
)

LIST_TIMEOUT = 30.0
RESUBSCRIBE = 5.0  # seconds between attempts to watch again after the socket went away


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
        self.log_level = "debug"  # the lowest level of a tool's log messages passed on (logging/setLevel)
        self.activations = Activations()  # what the client activated, applied again on a new connection
        self._relisting = asyncio.Lock()  # one relist at a time: a change is told once
        self.refused: str | None = None  # why the socket refused the key at the last listing (revoked, expired)

    def _warn(self, message: str) -> None:
        if message != self._said:
            warn(message)
        self._said = message

    async def refresh(self) -> None:
        if not self.key:
            self._warn("no API key: set TOOLDOCK_API_KEY (or OUBLIETTE_API_KEY); serving no tools")
            return
        try:
            await self.activations.restore(self.client, self.key, warn, retry=True)
            answer = await asyncio.wait_for(self.client.request(TOOLS, {"api_key": self.key}), LIST_TIMEOUT)
        except RelayError as err:
            self.registered, self.refused = {}, f"the relay refused the key: {err}"
            self._warn(f"{self.refused}; serving no tools")
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
        self.registered, self._said, self.refused = registered, None, None
        if self.pushes and self.watched_on != self.client.connects:  # a new connection: watch again
            await self.subscribe()

    async def relist(self) -> None:
        """List again; when the key's tools changed (a tool added, removed or changed), tell the client that
        listed (`notifications/tools/list_changed`, which it answers by listing again)."""
        async with self._relisting:
            before = self.registered
            await self.refresh()
            if self.registered != before and self.session is not None:
                with contextlib.suppress(Exception):  # the client is gone: the server's own loop ends
                    await self.session.send_tool_list_changed()

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
        if params.name not in tools.registered and tools.refused:  # revoked or expired since the client listed
            return types.CallToolResult(content=[types.TextContent(type="text", text=tools.refused)], is_error=True)
        if params.name not in tools.registered:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        if refusal := version_refusal(params.name, ctx.meta, tools.registered[params.name].meta):
            raise MCPError(types.INVALID_PARAMS, refusal)  # FastMCP's `version=`: one the listing does not offer
        name = params.name.removeprefix(tools.prefix)
        meta, notices = caller_meta(ctx, tools.log_level)
        if (version := asked_version(ctx.meta)) is not None:  # passed on: the socket runs that version
            meta[FASTMCP_META] = {"version": version}
        try:
            if tools.key:
                await tools.activations.restore(client, tools.key, warn, retry=False)
            arguments = params.arguments or {}
            call = {"api_key": tools.key, "tool": name, "arguments": arguments}
            activating = name.endswith(ACTIVATED)
            async with tools.activations.lock if activating else contextlib.nullcontext():
                result = await client.request(CALL, call, notices, meta, functools.partial(ask_session, ctx))
                answer = types.CallToolResult.model_validate(result)
                if activating and not answer.is_error:
                    tools.activations.remember(name, arguments, client.connects)
            if activating and not answer.is_error:  # this connection's upstream tools changed
                tools.session = ctx.session
                await tools.relist()
            return answer
        except RelayError as err:
            text = f"relay refused {name}: {err}"
        except OSError as exc:
            text = f"relay socket {client.path} unreachable: {getattr(exc, 'strerror', None) or exc}"
        except ValueError as exc:
            text = f"the relay's answer is not a tool result: {exc}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        tools.log_level = params.level
        return types.EmptyResult()

    with warnings.catch_warnings():  # 2026-07-28 deprecates logging/setLevel; older clients still use it
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            "tooldock-relay",
            version=tooldock.__version__,
            description="ToolDock's tools through the relay socket, as this sandbox's API key allows",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_set_logging_level=set_level,
        )


def caller_meta(ctx: Any, log_level: str) -> tuple[dict[str, Any], Notice]:
    """What a call asks the socket to tell it (its progress, if its client gave a progress token; log
    messages from `log_level` up), and where that goes: to the client, as the call's own notifications."""
    given = ctx.meta if isinstance(ctx.meta, dict) else {}
    token = given.get("progress_token", given.get("progressToken"))
    meta: dict[str, Any] = {LOG_LEVEL: log_level, **({"progressToken": True} if token is not None else {})}
    session = ctx.session
    if getattr(session, "can_send_request", True):  # a client that can be asked: what it declared
        answers: dict[str, Any] = {name: {} for name, found in declared(session.client_capabilities).items() if found}
        if answers:
            meta[CAN_ANSWER] = answers

    async def notices(method: str, params: dict[str, Any]) -> None:
        if method == PROGRESS and token is not None:
            progress, total = params.get("progress"), params.get("total")
            await ctx.session.send_progress_notification(
                token, float(progress or 0), total, params.get("message"), related_request_id=ctx.request_id
            )
        elif method == MESSAGE and isinstance(params.get("level"), str):  # the SDK checks it is a level
            await ctx.session.send_log_message(
                params["level"], params.get("data"), params.get("logger"), related_request_id=ctx.request_id
            )

    return meta, notices


async def watch(tools: KeyTools, every: float) -> None:
    """Ask the socket again when it says the key's tools changed, and every `every` seconds (0: never), and
    every RESUBSCRIBE seconds while the socket is not watching (to watch again once it is back); when the
    key's tools changed (names or descriptors), tell the client (`notifications/tools/list_changed`, which
    it answers by listing again)."""
    while True:
        timeout = every if every > 0 else None
        if tools.pushes and not tools.watching:  # the socket went away: reconnect and watch again soon
            timeout = min(timeout or RESUBSCRIBE, RESUBSCRIBE)
        try:
            event = await asyncio.wait_for(tools.client.events.get(), timeout)
        except TimeoutError:
            event = "timer"
        if event not in (LIST_CHANGED, "timer"):
            continue  # "closed": the next refresh reconnects and watches again
        await tools.relist()


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
