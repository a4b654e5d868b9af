"""Legacy MCP (protocol 2024-11-05): `GET /sse` opens a stream whose first event names the endpoint for
`POST /messages?session_id=...` (seed 000, "Legacy compatibility"). The SDK's SSE transport does the
protocol; ToolDock routes by `X-Namespace` (on both requests) to the namespace's MCP server, the same
one streamable HTTP uses. On unless ENABLE_LEGACY_MCP=false."""

from __future__ import annotations

from typing import Any

from mcp.server.sse import SseServerTransport
from starlette.types import Receive, Scope, Send

from tooldock.runtime.mcp.rules import origin_refused
from tooldock.runtime.mcp.server import McpHub

MESSAGES_PATH = "/messages"


class LegacySse:
    """`in_path`: the `/ns/{namespace}/sse` flavour, whose endpoint event points at
    `/ns/{namespace}/messages`, for clients that cannot send `X-Namespace`."""

    def __init__(self, hub: McpHub, max_body_bytes: int, in_path: bool = False) -> None:
        self.hub, self.max_body_bytes, self.in_path = hub, max_body_bytes, in_path
        self._transports: dict[str, SseServerTransport] = {}

    def _transport(self, namespace: str) -> SseServerTransport:
        if namespace not in self._transports:
            endpoint = f"/ns/{namespace}{MESSAGES_PATH}" if self.in_path else MESSAGES_PATH
            self._transports[namespace] = SseServerTransport(
                endpoint, security_settings=self.hub.security, max_request_body_size=self.max_body_bytes
            )
        return self._transports[namespace]

    async def _refused(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """MCP_ALLOWED_ORIGINS holds here too (the transport's own check covers loopback binds only)."""
        refused = origin_refused(scope, self.hub.settings.allowed_origins)
        if refused is not None:
            await refused(scope, receive, send)
        return refused is not None

    async def stream(self, namespace: str, scope: Scope, receive: Receive, send: Send) -> None:
        if await self._refused(scope, receive, send):
            return
        server: Any = self.hub.server(namespace)
        try:
            async with self._transport(namespace).connect_sse(scope, receive, send) as (read, write):
                await server.run(read, write, server.create_initialization_options())
        except ValueError:  # refused by the transport's own checks; it has already answered
            return

    async def message(self, namespace: str, scope: Scope, receive: Receive, send: Send) -> None:
        if await self._refused(scope, receive, send):
            return
        await self._transport(namespace).handle_post_message(scope, receive, send)
