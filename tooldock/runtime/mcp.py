"""MCP streamable HTTP at `/mcp`, built on the official SDK: one low-level `Server` and one session
manager per namespace, so a session belongs to exactly one namespace (a session id used with another
namespace's `X-Namespace` is unknown there: 404).

The SDK owns the protocol: version negotiation, sessions, SSE, JSON-RPC errors. ToolDock supplies the
tool list (pre-extracted descriptors) and the call path (`Engine.call_tool`), and converts ToolDock
errors into MCP results here, in one place.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

import tooldock

from ..errors import ToolDockError, ToolNotFound
from .engine import Engine
from .mcp_rules import precheck
from .settings import Settings

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def error_result(err: ToolDockError) -> types.CallToolResult:
    """A tool-level failure as MCP sees it: `isError` with the message as text and the error as data."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{err.code}: {err.message}")],
        structured_content={"error": err.to_dict()},
        is_error=True,
    )


class _Server(Server[Any]):
    """Advertises `tools.listChanged`: ToolDock tells open sessions when a namespace's tools change."""

    def create_initialization_options(self, notification_options=None, *args: Any, **kwargs: Any):
        return super().create_initialization_options(NotificationOptions(tools_changed=True), *args, **kwargs)


def _connection(ctx: Any) -> Any:
    """The connection behind a request. SDK 2.x hands handlers a per-request `ServerSession`; change
    notifications must go to the connection-scoped object it wraps (no public accessor yet)."""
    return getattr(ctx.session, "_connection", ctx.session)


def _server_for(namespace: str, engine: Engine, sessions: weakref.WeakSet) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        sessions.add(_connection(ctx))
        try:
            tools = engine.list_tools(namespace)
        except ToolDockError as err:
            raise MCPError(types.INVALID_REQUEST, err.message) from err
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        sessions.add(_connection(ctx))
        try:
            result = await engine.call_tool(namespace, params.name, params.arguments or {})
        except ToolNotFound as err:
            raise MCPError(types.INVALID_PARAMS, err.message) from err
        except ToolDockError as err:
            return error_result(err)
        return types.CallToolResult.model_validate(result)

    entry = engine.registry.snapshot.entries.get(namespace)
    description = entry.source.config.description if entry is not None else None
    return _Server(
        f"tooldock/{namespace}",
        version=tooldock.__version__,
        description=description or None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class McpHub:
    """Session managers per namespace, created on first use and run until the gateway stops."""

    def __init__(self, engine: Engine, settings: Settings, host: str) -> None:
        self.engine, self.settings = engine, settings
        self._managers: dict[str, StreamableHTTPSessionManager] = {}
        self._servers: dict[str, Server[Any]] = {}
        # Sessions seen per namespace (from their first tools/list or tools/call), for list_changed.
        self._sessions: dict[str, weakref.WeakSet] = {}
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        security = None
        if settings.dns_rebinding_protection and host in LOOPBACK_HOSTS:
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
            )
        self._security = security

    @contextlib.asynccontextmanager
    async def run(self):
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    def server(self, namespace: str) -> Server[Any]:
        """The namespace's MCP server (one per namespace, shared by streamable HTTP and legacy SSE)."""
        if namespace not in self._servers:
            sessions = self._sessions.setdefault(namespace, weakref.WeakSet())
            self._servers[namespace] = _server_for(namespace, self.engine, sessions)
        return self._servers[namespace]

    @property
    def security(self) -> TransportSecuritySettings | None:
        return self._security

    async def _manager(self, namespace: str) -> StreamableHTTPSessionManager:
        manager = self._managers.get(namespace)
        if manager is not None:
            return manager
        async with self._lock:
            if namespace not in self._managers:
                manager = StreamableHTTPSessionManager(
                    app=self.server(namespace),
                    security_settings=self._security,
                    max_request_body_size=self.settings.max_body_bytes,
                )

                async def keep_running(*, task_status=anyio.TASK_STATUS_IGNORED) -> None:
                    async with manager.run():
                        task_status.started()
                        await anyio.sleep_forever()

                assert self._tg is not None, "McpHub.run() must be entered first"
                await self._tg.start(keep_running)
                self._managers[namespace] = manager
        return self._managers[namespace]

    async def tools_changed(self, namespaces: list[str]) -> None:
        """Send `notifications/tools/list_changed` to every open session of these namespaces."""
        for namespace in namespaces:
            for session in list(self._sessions.get(namespace, ())):
                try:
                    await session.send_tool_list_changed()
                except Exception:  # a closed session: forget it
                    self._sessions[namespace].discard(session)

    async def handle(self, namespace: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one `/mcp` request for a namespace the caller has already resolved."""
        refused = precheck(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        manager = await self._manager(namespace)
        await manager.handle_request(scope, receive, send)
