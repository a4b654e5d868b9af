"""Context tool calls, resource reads and prompts handed straight to the worker's fastmcp server, with no
in-memory MCP session between.

They used to run through in-memory sessions: the SDK's client encoded the request, a JSON-RPC dispatcher
carried it over memory streams to the server's, and every notification and the result were validated into
models and dumped again on the way back. Here the SDK's own `ServerRunner` takes the request as its
dispatcher would hand it over (`runner.on_request(channel, "tools/call", params)`), so the server side is
exactly what it was: the request's validation, fastmcp's middleware, its `Context`, the result's shaping
for 2025-11-25. Only the channel is ours: a `DispatchContext` whose notifications (progress, log messages)
and requests (sampling, elicitation, roots) go to the call's `Relay`, that is, onto the worker protocol.

The server's lifespan is entered once, by a keeper task of its own (an anyio context must be left by the
task that entered it), and held until the worker stops. The channel does not re-check a result against the
tool's output schema (an in-memory client did; a plain tool's result never was): the MCP client that made
the call checks it against the schema it listed.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from fastmcp.client.transports.memory import _enter_server_lifespan
from fastmcp.server.context import reset_transport, set_transport
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp.shared.exceptions import MCPError

from tooldock.worker.callcontext import client_params, transport_of
from tooldock.worker.callstore import CALL
from tooldock.worker.protocol import LIST_CHANGED, LOG_LEVELS, shown_level

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from tooldock.worker.bridge import Relay

PROTOCOL = "2025-11-25"  # what the in-memory sessions spoke: `ctx.elicit()` and sampling have a back-channel
_CLIENT = types.Implementation(name="tooldock-gateway", version="1")
# A question the calling client did not declare: refused as the SDK's client refuses it.
UNDECLARED = {
    "sampling/createMessage": ("sampling", "Sampling not supported"),
    "elicitation/create": ("elicitation", "Elicitation not supported"),
    "roots/list": ("roots", "List roots not supported"),
}


class CallChannel:
    """One call's `DispatchContext`, and its connection's standalone channel too: what fastmcp sends for
    the call (`ctx.list_roots()` and a log line without a request id use the standalone one) goes to its
    relay, as everything an in-memory session received went to the call that held it."""

    def __init__(self, relay: Relay, request_id: str | int, progress: bool, log_level: str | None, logs: bool) -> None:
        self.relay, self._request_id, self._progress, self._logs = relay, request_id, progress, logs
        self._log_level = log_level if log_level in LOG_LEVELS else None
        self._cancelled = anyio.Event()
        self.transport = None
        self.message_metadata = None

    @property
    def request_id(self) -> str | int:
        return self._request_id

    @property
    def can_send_request(self) -> bool:
        return True

    @property
    def cancel_requested(self) -> anyio.Event:
        return self._cancelled

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress:
            await self.relay.event("progress", {"progress": progress, "total": total, "message": message})

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        data = dict(params or {})
        if method == "notifications/progress":
            if self._progress:
                await self.progress(data.get("progress", 0), data.get("total"), data.get("message"))
        elif method == "notifications/message" and self._logs and shown_level(data, self._log_level):
            await self.relay.event("log", data)
        elif method in LIST_CHANGED:  # the session's visibility rules changed (visibility.py)
            await self.relay.event("changed", {"method": method})

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> dict[str, Any]:
        flag, refusal = UNDECLARED.get(method, ("", ""))
        if flag and not self.relay.client.get(flag):
            if self.relay.client.get("inputRequired"):  # a 2026-07-28 caller: MCP's MissingRequiredClientCapability
                raise MCPError(
                    types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"the client did not declare the {flag} capability this tool asks for ({method})",
                    {"requiredCapabilities": {flag: {}}},
                )
            raise MCPError(types.INVALID_REQUEST, refusal)  # what the SDK's client answers when it has no callback
        return await self.relay.ask(method, dict(params or {}))


class DirectCalls:
    def __init__(self, server: FastMCP[Any]) -> None:
        self.server = server
        self._state: Any = None
        self._ready: asyncio.Future[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)

    async def _started(self) -> None:
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._keeper = asyncio.ensure_future(self._keep(self._ready))
        await asyncio.shield(self._ready)

    async def _keep(self, ready: asyncio.Future[None]) -> None:
        lowlevel = self.server._mcp_server
        try:
            async with _enter_server_lifespan(server=self.server), lowlevel.lifespan(lowlevel) as state:
                self._state = state
                ready.set_result(None)
                await asyncio.get_running_loop().create_future()  # held until the worker stops (cancelled)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        relay: Relay,
        progress: bool = False,
        log_level: str | None = None,
        logs: bool = True,
    ) -> dict[str, Any]:
        """The server's wire result for `method` (`tools/call`, `resources/read`, `prompts/get`), as a
        2025-11-25 client would have received it: log lines at `log_level` and up (all when None; none
        without `logs`, as a resource's or prompt's never reached the caller), progress when asked; a
        guard's rounds (`relay.rounds`) ride in the params."""
        await self._started()
        asked = relay.request  # the client's request, as the tool reads it (callcontext.py)
        rid = asked.get("id")
        channel = CallChannel(relay, rid if rid is not None else next(self._ids), progress, log_level, logs)
        connection = Connection(  # `session_id`: fastmcp keys `ctx.set_state()` and `ctx.session_id` by it
            channel,
            protocol_version=PROTOCOL,
            session_id=relay.scope,
            client_params=client_params(asked, relay.client, PROTOCOL, _CLIENT),
        )
        connection.initialized.set()
        runner = ServerRunner(server=self.server._mcp_server, connection=connection, lifespan_state=self._state)
        params = dict(params)
        meta = {**(asked.get("meta") or {}), **params.get("_meta", {})}
        if progress and meta.get("progressToken") is None:
            meta["progressToken"] = f"p{channel.request_id}"
        if meta:
            params["_meta"] = meta
        params.update(relay.rounds)
        token = CALL.set(relay)  # whose rules and values fastmcp reads and writes (visibility.py, sessionvalues.py)
        transport = set_transport(transport_of(asked))
        try:
            result = dict(await runner.on_request(channel, method, params))  # type: ignore[arg-type]
        finally:
            reset_transport(transport)
            CALL.reset(token)
        for key in ("ttlMs", "cacheScope", "resultType"):  # the wire result's, for a client of its own
            result.pop(key, None)
        return result
