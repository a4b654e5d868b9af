"""MCP streamable HTTP at `/mcp`, built on the official SDK: one low-level `Server` and one session
manager per namespace, so a session belongs to exactly one namespace (a session id used with another
namespace's `X-Namespace` is unknown there: 404).

The SDK owns the protocol: version negotiation, sessions, SSE, JSON-RPC errors. ToolDock supplies the
tools and the call path (`Engine.call_tool`), and converts its errors into MCP results here, in one place.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskStatus
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import ListenHandler
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import (
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

import tooldock
from tooldock.errors import (
    InvalidArguments,
    NotFound,
    NotInScope,
    StateUnavailable,
    ToolDockError,
    ToolInactive,
    ToolNotFound,
    UpstreamError,
)
from tooldock.runtime import jsonin
from tooldock.runtime.access import key_of_request
from tooldock.runtime.engine import Engine
from tooldock.runtime.mcp import compat as mcp_compat
from tooldock.runtime.mcp import inputreq
from tooldock.runtime.mcp.caller import calling, connection_of, request_id_of
from tooldock.runtime.mcp.events import MemoryEventStore, ScopedSessionManager
from tooldock.runtime.mcp.lean import LeanPath
from tooldock.runtime.mcp.notices import ListenBus, Notices
from tooldock.runtime.mcp.relay import McpRelay
from tooldock.runtime.mcp.results import error_result, state_error, upstream_error
from tooldock.runtime.mcp.rules import precheck
from tooldock.runtime.mcp.session import STATELESS_SESSION, SessionState, session_states, views
from tooldock.runtime.mcp.sharedsessions import Replication
from tooldock.runtime.mcp.tasks import TasksExtension, install_tasks
from tooldock.runtime.mcp.visibility import check_visible, hidden_for
from tooldock.runtime.settings import Settings
from tooldock.runtime.versions import check_version
from tooldock.upstream.catalog import ACTIVATE

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
EVENT_STREAMS_KEPT = 100  # a namespace's event store holds MCP_EVENT_BUFFER x this many events in all,
EVENT_BYTES_KEPT = 64 * 1024 * 1024  # and at most about this many bytes of messages


class _Server(Server[Any]):
    """Advertises `listChanged` for tools, resources and prompts, and sends `resources/updated` (reloads)."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> InitializationOptions:
        options = NotificationOptions(tools_changed=True, resources_changed=True, prompts_changed=True)
        return super().create_initialization_options(options, *args, **kwargs)


RESOURCE_NOT_FOUND = -32002  # the code of an unknown resource URI up to 2025-11-25 (2026-07-28: -32602)


def _not_found_code(ctx: Any) -> int:
    """An unknown resource URI: -32002 for 2025-era sessions, as their spec says; -32602 (invalid params) for
    2026-07-28 requests (SEP-2164, which retired -32002)."""
    modern = getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS
    return types.INVALID_PARAMS if modern else RESOURCE_NOT_FOUND


def _server_for(
    namespace: str,
    engine: Engine,
    state: Callable[[Any], SessionState],
    bus: ListenBus,
) -> Server[Any]:
    session_key = views(state)

    def entry() -> Any:
        try:
            return engine.namespace(namespace)
        except ToolDockError as err:
            raise MCPError(types.INVALID_REQUEST, err.message) from err

    async def worker(op: str, ctx: Any, **fields: Any) -> dict[str, Any]:
        fields.update(state(ctx).fields())  # fastmcp hides what the session's rules hide, and has its values
        try:
            with request_id_of(ctx), calling(ctx):
                return await engine.worker_request(namespace, op, session_key(ctx), **fields)
        except NotFound as err:
            if op != "resources.read":
                raise MCPError(types.INVALID_PARAMS, err.message) from err
            raise MCPError(_not_found_code(ctx), err.message, {"uri": fields.get("uri")}) from err
        except (InvalidArguments, ToolInactive) as err:
            raise MCPError(types.INVALID_PARAMS, err.message) from err
        except UpstreamError as err:
            raise upstream_error(err) from err
        except StateUnavailable as err:
            raise state_error(err) from err
        except ToolDockError as err:  # worded as FastMCP words it (its message alone); ToolDock's code as data
            raise MCPError(types.INTERNAL_ERROR, err.message, {"code": err.code}) from err

    async def surface(ctx: Any, kind: str) -> list[dict[str, Any]]:
        entry()
        hidden = await hidden_for(state(ctx).visibility, namespace, engine)  # the session's visibility rules
        items = engine.surface(namespace, kind, session_key(ctx))
        return hidden.surface(kind, items) if hidden is not None else items

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        entry()
        tools = engine.list_tools(namespace, session_key(ctx), key_of_request(ctx.request))  # an API key's scope
        if (hidden := await hidden_for(state(ctx).visibility, namespace, engine)) is not None:
            tools = hidden.tools_listed(tools, engine.settings.inline_schema_refs)
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        relay = McpRelay(ctx, state(ctx).log_level, state(ctx))
        relay.session_key = key = session_key(ctx)
        found = jsonin.problem(params.arguments or {}, "arguments")
        if found is not None:  # NaN and infinities: the SDK's parser takes them as numbers, JSON has none
            raise MCPError(types.INVALID_PARAMS, f"invalid arguments: {found}")
        try:
            with request_id_of(ctx), calling(ctx):
                arguments, caller = params.arguments or {}, key_of_request(ctx.request)
                check_version(engine, namespace, params.name, params.meta, key, caller)  # FastMCP's `version=`
                await check_visible(relay.visibility, namespace, engine, params.name, params.meta, key, caller)
                result = await engine.call_tool(namespace, params.name, arguments, relay, session=key, key=caller)
        except (ToolNotFound, NotInScope) as err:  # unknown, or outside the API key's scope: a JSON-RPC error
            raise MCPError(types.INVALID_PARAMS, err.message) from err
        except UpstreamError as err:
            raise upstream_error(err) from err
        except StateUnavailable as err:
            raise state_error(err) from err
        except ToolDockError as err:
            return error_result(err)
        if params.name == ACTIVATE and entry().source.is_upstream:
            await activated(ctx, key)
        return types.CallToolResult.model_validate(result)

    async def activated(ctx: Any, key: Any) -> None:
        """This caller's view changed: its tool and resource lists (and the catalog) are new; on replicas, the
        others have the session's new view before the answer (a next request may reach any of them)."""
        if key != STATELESS_SESSION and (shared := state(ctx).changed()) is not None:
            await shared
        if key == STATELESS_SESSION:  # the listen streams of every replica (the view itself is per replica)
            await bus.share(ToolsListChanged(), ResourcesListChanged())
            return
        with contextlib.suppress(Exception):  # a session that went away needs no notice
            await connection_of(ctx).send_tool_list_changed()
            await connection_of(ctx).send_resource_list_changed()

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[types.Resource.model_validate(r) for r in await surface(ctx, "resources")]
        )

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        templates = await surface(ctx, "resourceTemplates")
        return types.ListResourceTemplatesResult(
            resource_templates=[types.ResourceTemplate.model_validate(t) for t in templates]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult.model_validate(await worker("resources.read", ctx, uri=str(params.uri)))

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        if entry().source.is_upstream:  # passed through: the upstream server tells us when it changes
            await worker("resources.subscribe", ctx, uri=str(params.uri))
        state(ctx).subscribe(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        state(ctx).unsubscribe(str(params.uri))
        return types.EmptyResult()

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt.model_validate(p) for p in await surface(ctx, "prompts")])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return types.GetPromptResult.model_validate(
            await worker("prompts.get", ctx, name=params.name, arguments=params.arguments)
        )

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref.model_dump(mode="json", by_alias=True, exclude_none=True)
        argument = params.argument.model_dump(mode="json", by_alias=True, exclude_none=True)
        return types.CompleteResult.model_validate(await worker("completion.complete", ctx, ref=ref, argument=argument))

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        state(ctx).set_log_level(params.level)
        return types.EmptyResult()

    found = engine.registry.snapshot.entries.get(namespace)
    description = found.source.config.description if found is not None else None
    with warnings.catch_warnings():
        # 2026-07-28 deprecates `logging/setLevel` (SEP-2577); clients of 2025-11-25 and older still use it.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return _Server(
            f"tooldock/{namespace}",
            version=tooldock.__version__,
            description=description or None,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_level,
            # 2026-07-28 has no standing stream: a client asks for change notices with subscriptions/listen.
            on_subscriptions_listen=ListenHandler(bus),
        )


class McpHub:
    """Session managers per namespace, created on first use and run until the gateway stops."""

    def __init__(
        self,
        engine: Engine | None,
        settings: Settings,
        host: str,
        servers: Callable[[str], Server[Any]] | None = None,
    ) -> None:
        """`servers` makes the MCP server of a name when it is not a gateway namespace served through the
        engine: the manager serves its own tools over this same stack that way."""
        self.engine, self.settings, self._make = engine, settings, servers
        self._managers: dict[str, StreamableHTTPSessionManager] = {}
        self._servers: dict[str, Server[Any]] = {}
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        security = None
        if settings.dns_rebinding_protection and host in LOOPBACK_HOSTS:
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
                # MCP_ALLOWED_ORIGINS replaces the loopback origins; rules.origin_refused checks it for every bind.
                allowed_origins=list(settings.allowed_origins or LOOPBACK_ORIGINS),
            )
        self._security = security
        # tools/call of plain tools, tools/list and ping on established sessions, answered without the SDK
        self.lean = LeanPath(engine, settings.max_body_bytes, security) if engine and settings.lean_mcp else None
        self.replication = Replication.of(engine, settings) if engine is not None else None
        self.notices = Notices(engine, self.replication)  # what sessions and listen streams are told (notices.py)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[McpHub]:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.replication is not None:  # what other replicas' clients ended or changed, or raised for all
                tg.start_soon(self.replication.follow, self._managers)
                tg.start_soon(self.notices.follow)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    def server(self, namespace: str) -> Server[Any]:
        """The namespace's MCP server (one per namespace, shared by streamable HTTP and legacy SSE)."""
        if namespace not in self._servers:
            sessions = self.notices.sessions.setdefault(namespace, weakref.WeakKeyDictionary())
            bus = self.notices.bus(namespace)
            if self._make is not None:
                self._servers[namespace] = self._make(namespace)
            else:
                engine = self.engine
                assert engine is not None, "a hub without an engine needs a `servers` factory"
                seen = self.lean.seen if self.lean is not None else (lambda ctx, state: None)
                made = self.replication.sharing_of(namespace).made if self.replication is not None else None
                state = session_states(sessions, lambda: engine.registry.snapshot.generation, seen, made)
                server = self._servers[namespace] = _server_for(namespace, engine, state, bus)
                install_tasks(server, TasksExtension(namespace, engine, views(state), bus))  # mcp/tasks.py
                # requestState, input_required rounds; a prompt's or resource's questions, with its session
                inputreq.install(server, self.settings, namespace, lambda ctx, lvl: McpRelay(ctx, lvl, state(ctx)))
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
                # Resumable SSE (Last-Event-ID replay from a bounded buffer, `retry:` in priming events),
                # idle sessions closed after MCP_SESSION_TTL_HOURS (their id then answers 404), and at
                # most MCP_MAX_SESSIONS open sessions (one more initialize answers 503).
                buffer = self.settings.event_buffer
                events = MemoryEventStore(buffer, buffer * EVENT_STREAMS_KEPT, EVENT_BYTES_KEPT)
                options: dict[str, Any] = dict(
                    app=self.server(namespace),
                    event_store=events,
                    retry_interval=self.settings.sse_retry_ms,
                    session_idle_timeout=self.settings.session_ttl,
                    max_sessions=self.settings.max_sessions,
                    security_settings=self._security,
                    max_request_body_size=self.settings.max_body_bytes,
                )
                replicas = self.replication  # sessions any replica serves (sharedsessions.py), or this one's
                manager = replicas.manager(namespace, **options) if replicas else ScopedSessionManager(**options)
                if replicas:  # a change made elsewhere to a session opened here, before its state is made
                    replicas.sharing_of(namespace).held = lambda sid: sid in manager._server_instances

                async def keep_running(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
                    async with manager.run():
                        task_status.started()
                        await anyio.sleep_forever()

                assert self._tg is not None, "McpHub.run() must be entered first"
                await self._tg.start(keep_running)
                self._managers[namespace] = manager
        return self._managers[namespace]

    async def tools_changed(self, namespaces: list[str]) -> None:
        await self.notices.tools_changed(namespaces)  # a registry listener: reloads, rebuilds, removals

    async def resource_updated(self, namespace: str, uri: str) -> None:
        await self.notices.resource_updated(namespace, uri)  # an upstream server's resources/updated

    def session_counts(self) -> dict[str, int]:
        return self.notices.session_counts(dict(self._managers))

    async def handle(self, namespace: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one `/mcp` request for a namespace the caller has already resolved."""
        refused = precheck(scope, self.settings.allowed_origins)
        if refused is not None:
            await refused(scope, receive, send)
            return
        manager = await self._manager(namespace)
        if self.lean is not None:
            receive = await self.lean.handle(namespace, manager, scope, receive, send)  # type: ignore[assignment]
            if receive is None:
                return
        await mcp_compat.serve(manager.handle_request, scope, receive, send, self.settings.max_body_bytes)
