"""An upstream namespace as the gateway sees any namespace: a `Worker` (runtime/backend.py) whose tools come
from upstream MCP servers instead of a worker process.

It starts one `Connection` per `[[servers]]` entry, merges what they list into a `Catalog`, and answers
the worker calls: tools (through `toolman_activate`'s activation), resources, templates, prompts and
completions, each routed to its server with the prefix taken off. What a caller sees depends on its view:
an MCP session (and a relay-socket connection) has its own `Activation`; REST callers (no session) see the defaults
from `active_toolsets`. A server that goes away takes its items out of the catalog; open sessions are told.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import weakref
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError

from tooldock.errors import InvalidArguments, NotFound, ToolInactive
from tooldock.namespace.models import NamespaceSource
from tooldock.namespace.toolsfile import UpstreamConfig
from tooldock.namespace.versions import CALL_VERSION, FASTMCP_META
from tooldock.upstream.asking import drive, put, refusal_mid_call
from tooldock.upstream.cache import SchemaCache
from tooldock.upstream.catalog import ACTIVATE, Activation, Catalog, names_in, prefixed
from tooldock.upstream.connection import Connection, Listing
from tooldock.upstream.resolve import Resolver

WorkerState = Literal["starting", "ready", "degraded", "failed", "stopped"]


class UpstreamWorker:
    def __init__(self, source: NamespaceSource, secrets: Mapping[str, str], cache_dir: Path | None) -> None:
        assert source.upstream is not None, "an upstream worker needs a valid tools.toml"
        self.namespace, self.source = source.name, source
        self.config: UpstreamConfig = source.upstream
        self._phase: WorkerState = "starting"  # then "ready" (see `state`) once start() returns, "stopped" at the end
        self.failed_files: list[dict[str, Any]] = []
        self.deps_synced = False
        self.last_error = ""
        self.cache = SchemaCache(cache_dir / f"{source.name}.json" if cache_dir else None)
        resolver = Resolver(source.name, cache_dir)
        self.connections = [
            Connection(
                spec,
                source.path,
                secrets,
                startup_timeout=self.config.startup_timeout,
                restart=self.config.restart,
                on_up=self._up,
                on_down=self._down,
                on_notification=self._notification,
                resolver=resolver,
                owner=source.name,
            )
            for spec in self.config.servers
        ]
        for index, conn in enumerate(self.connections):
            conn.log_sink = self._log_sink(index)
            conn.ask_sink = self._ask_sink(index)
        self._cached = [self.cache.get(spec) for spec in self.config.servers]
        self.catalog = self._build()
        self._views: weakref.WeakKeyDictionary[Any, Activation] = weakref.WeakKeyDictionary()
        self._named: dict[str, Activation] = {}
        self._inflight: list[list[Any]] = [[] for _ in self.connections]  # per server: relays of calls in flight
        self._idle = asyncio.Event()
        self._idle.set()
        # Set by the registry: this namespace's lists changed / a subscribed resource changed upstream.
        self.on_change: Callable[[], None] | None = None
        self.on_resource_updated: Callable[[str], None] | None = None

    # -- the catalog ------------------------------------------------------------------------------------

    def _build(self) -> Catalog:
        servers: list[tuple[str, Listing | None]] = []
        for conn, cached in zip(self.connections, self._cached, strict=True):
            if conn.state == "ready":
                servers.append((conn.spec.namespace, conn.listing))
            elif conn.state == "starting" and cached is not None and not conn.first_attempt.is_set():
                servers.append((conn.spec.namespace, cached))  # not up yet: what it listed last time
            else:
                servers.append((conn.spec.namespace, None))
        return Catalog(servers, self.config.active_toolsets)

    def _rebuild(self) -> None:
        self.catalog = self._build()
        if self.on_change is not None:
            self.on_change()

    def _up(self, conn: Connection) -> None:
        self.cache.put(list(self.config.servers), conn.spec, conn.listing)
        index = self.connections.index(conn)
        self._cached[index] = conn.listing
        if self._phase == "ready":
            self._rebuild()

    def _down(self, conn: Connection) -> None:
        """A server went away, or failed the first start of this gateway while listed from the cache."""
        gone = conn.listing if conn.listing != Listing() else (self._cached[self.connections.index(conn)] or Listing())
        if gone != Listing():
            print(
                f"tooldock: namespace {self.namespace!r}: upstream {conn.spec.label} is down; its {len(gone.tools)} "
                f"tool(s), {len(gone.resources) + len(gone.templates)} resource(s) and {len(gone.prompts)} prompt(s) "
                f"left the catalog{' until it is restarted' if conn.restart else ''}",
                file=sys.stderr,
                flush=True,
            )
        conn.listing = Listing()
        if self._phase == "ready":
            self._rebuild()

    async def _notification(self, conn: Connection, message: Any) -> None:
        root = message.root if hasattr(message, "root") else message
        if isinstance(
            root,
            (
                types.ToolListChangedNotification,
                types.ResourceListChangedNotification,
                types.PromptListChangedNotification,
            ),
        ):
            with contextlib.suppress(Exception):
                await conn.relist()
                self._up(conn)
        elif isinstance(root, types.ResourceUpdatedNotification) and self.on_resource_updated is not None:
            self.on_resource_updated(prefixed(conn.spec.namespace, str(root.params.uri)))

    # -- views ------------------------------------------------------------------------------------------

    def activation(self, session: Any) -> Activation | None:
        """The caller's activation: None (the defaults) for callers without an MCP session or relay connection;
        an MCP session brings its own (kept in its state, which replicas share: runtime/mcp/session.py)."""
        if session is None or isinstance(session, Activation):
            return session
        if isinstance(session, str):
            return self._named.setdefault(session, Activation())
        found = self._views.get(session)
        if found is None:
            found = self._views[session] = Activation()
        return found

    @property
    def tools(self) -> list[dict[str, Any]]:
        """What REST and OpenAPI offer: the tools `active_toolsets` turns on."""
        return self.catalog.active_tools(None)

    @property
    def surface(self) -> dict[str, list[dict[str, Any]]]:
        return self.surface_view(None)

    def tools_for(self, session: Any) -> list[dict[str, Any]]:
        """What an MCP session lists: `toolman_activate` (its catalog marking this session's state) first."""
        view = self.activation(session)
        return [self.catalog.activation_tool(view), *self.catalog.active_tools(view)]

    def surface_view(self, session: Any) -> dict[str, list[dict[str, Any]]]:
        view = self.activation(session)
        return {
            "resources": self.catalog.active_resources(view),
            "resourceTemplates": self.catalog.active_templates(view),
            "prompts": [item.descriptor for item in self.catalog.prompts.values()],
        }

    def tool_for(self, name: str, session: Any) -> dict[str, Any]:
        view = self.activation(session)
        if name == ACTIVATE and session is not None:
            return self.catalog.activation_tool(view)
        if name == ACTIVATE:
            raise ToolInactive(
                f"{ACTIVATE} changes what one MCP session or relay-socket connection sees; REST callers use the "
                "tools that tools.toml's active_toolsets turns on",
                {"tool": name},
            )
        return self.catalog.tool(name, view).descriptor

    # -- calls ------------------------------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        for conn in self.connections:
            conn.start()
        cached = all(c is not None for c in self._cached)
        if not cached:  # nothing to list yet: wait (bounded) until every server is up or has failed
            waits = [asyncio.create_task(c.first_attempt.wait()) for c in self.connections]
            _, pending = await asyncio.wait(waits, timeout=min(timeout, self.config.startup_timeout + 5))
            for task in pending:
                task.cancel()
        self._settle()

    def _settle(self) -> None:
        self._phase = "ready"
        if self.state == "failed":
            self.last_error = "; ".join(f"{c.spec.label}: {c.last_error}" for c in self.connections)
        self.catalog = self._build()

    @property
    def state(self) -> WorkerState:
        """ready: every server up (or starting again from the cache); degraded: some are down; failed: all."""
        if self._phase != "ready":
            return self._phase
        states = [c.state for c in self.connections]
        if all(
            s == "ready" or (s == "starting" and not c.first_attempt.is_set())
            for s, c in zip(states, self.connections, strict=True)
        ):
            return "ready"
        return "degraded" if any(s in ("ready", "starting") for s in states) else "failed"

    async def _connection_for(self, index: int) -> Connection:
        conn = self.connections[index]
        if conn.state == "starting":  # listed from the cache and still starting: wait for it, bounded
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(conn.first_attempt.wait(), self.config.startup_timeout)
        return conn

    async def call(self, tool: str, arguments: dict[str, Any], relay: Any = None) -> dict[str, Any]:
        session = getattr(relay, "session_key", None)
        view = self.activation(session)
        if tool == ACTIVATE:
            self.tool_for(tool, session)
            message = self.catalog.activate(
                view or Activation(),
                *(names_in(arguments.get(k), k) for k in ("tools_on", "tools_off", "resources_on", "resources_off")),
            )
            return {"content": [{"type": "text", "text": message}], "isError": False}
        item = self.catalog.tool(tool, view)
        wants_progress = relay is not None and relay.call_fields().get("progress")

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await relay.handle(
                {"op": "event", "event": "progress", "data": {"progress": value, "total": total, "message": message}}
            )

        version = CALL_VERSION.get()  # a FastMCP client's `version=`, which this server's listing offered

        async def work(conn: Connection) -> dict[str, Any]:
            params: dict[str, Any] = {"name": item.original, "arguments": arguments}
            if version is not None:
                params["_meta"] = {FASTMCP_META: {"version": version}}
            return await self._rounds(conn, "tools/call", params, relay, progress if wants_progress else None)

        return await self._tracked(item.server, relay, work)

    async def _tracked(
        self, index: int, relay: Any, work: Callable[[Connection], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """Run `work` on server `index`'s connection, counted in flight from the start: a call still waiting
        for its server to come up (listed from the cache) is drained by `stop`, not cut off by it."""
        calls = self._inflight[index]
        calls.append(relay)
        self._idle.clear()
        try:
            return await work(await self._connection_for(index))
        finally:
            calls.remove(relay)
            if not any(self._inflight):
                self._idle.set()

    def _log_sink(self, index: int) -> Callable[[types.LoggingMessageNotificationParams], Any]:
        async def sink(params: types.LoggingMessageNotificationParams) -> None:
            calls = [r for r in self._inflight[index] if r is not None]
            if len(calls) == 1:  # stdio carries no request id for a log line: only an unambiguous one is relayed
                data = {"level": params.level, "data": params.data, "logger": params.logger}
                with contextlib.suppress(Exception):
                    await calls[0].handle({"op": "event", "event": "log", "data": data})

        return sink

    @staticmethod
    def _rounds(conn: Connection, method: str, params: dict[str, Any], relay: Any, progress: Any = None) -> Any:
        """The request, its `input_required` rounds put to the caller (asking.drive)."""

        def send(answers: dict[str, Any] | None, state: str | None) -> Any:
            return conn.send_round(method, params, answers, state, progress)

        return drive(send, relay, conn.spec.label)

    def _ask_sink(self, index: int) -> Callable[[str, dict[str, Any]], Any]:
        label = self.connections[index].spec.label

        async def sink(method: str, params: dict[str, Any]) -> dict[str, Any]:
            calls = self._inflight[index]
            why = refusal_mid_call(calls, method)
            if why is not None:
                print(f"tooldock: upstream {label}: refused its {method} request: {why}", file=sys.stderr, flush=True)
                raise MCPError(types.INVALID_REQUEST, f"ToolDock refused {method}: {why}")
            return await put(calls[0], method, params)

        return sink

    async def request(self, op: str, session: Any = None, relay: Any = None, **fields: Any) -> Any:
        """`relay`: who answers the server's questions (a 2026-07-28 server's `input_required`, asking.py)."""
        view = self.activation(session)
        if op == "resources.read":
            index, uri = self.catalog.resource(str(fields.get("uri")), view)

            async def read(conn: Connection) -> dict[str, Any]:
                result: dict[str, Any] = await self._rounds(conn, "resources/read", {"uri": uri}, relay)
                for content in result.get("contents") or []:
                    if isinstance(content.get("uri"), str):
                        content["uri"] = prefixed(conn.spec.namespace, content["uri"])
                return result

            return await self._tracked(index, relay, read)
        if op == "prompts.get":
            prompt = self.catalog.prompt(str(fields.get("name")))
            params = {"name": prompt.original, "arguments": fields.get("arguments")}

            async def get(conn: Connection) -> dict[str, Any]:
                return await self._rounds(conn, "prompts/get", params, relay)

            return await self._tracked(prompt.server, relay, get)
        if op in ("resources.subscribe", "resources.unsubscribe"):
            index, uri = self.catalog.resource(str(fields.get("uri")), view)
            change: Any = (
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
                if op == "resources.subscribe"
                else types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
            )

            async def subscription(conn: Connection) -> dict[str, Any]:
                resources = conn.capabilities.resources if conn.capabilities is not None else None
                if resources is None or not resources.subscribe:
                    return {}  # the server has no subscriptions: nothing will change, nothing to pass on
                return await conn.request(change, types.EmptyResult)

            return await self._tracked(index, None, subscription)
        if op == "completion.complete":
            return await self._complete(fields.get("ref") or {}, fields.get("argument") or {}, view)
        raise InvalidArguments(f"upstream namespaces do not answer {op!r}")

    async def _complete(self, ref: dict[str, Any], argument: dict[str, Any], view: Activation | None) -> Any:
        if ref.get("type") == "ref/prompt":
            item = self.catalog.prompt(str(ref.get("name")))
            upstream_ref: dict[str, Any] = {"type": "ref/prompt", "name": item.original}
        else:
            template = self.catalog.templates.get(str(ref.get("uri")))
            if template is None:
                raise NotFound(f"unknown resource template {ref.get('uri')!r}")
            item, upstream_ref = template, {"type": "ref/resource", "uri": template.original}
        params = types.CompleteRequestParams.model_validate({"ref": upstream_ref, "argument": argument})
        request = types.CompleteRequest(params=params)
        return await self._tracked(item.server, None, lambda conn: conn.request(request, types.CompleteResult))

    # -- life -------------------------------------------------------------------------------------------

    async def stop(self, drain_timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), drain_timeout)
        await self.release()

    async def release(self) -> None:
        """Close every session and stop every server this namespace spawned (the gateway is going away)."""
        await asyncio.gather(*(c.stop() for c in self.connections))
        self._phase = "stopped"

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "kind": "upstream",
            "last_error": self.last_error or None,
            "restarts": sum(c.restarts for c in self.connections),
            "inflight": sum(len(calls) for calls in self._inflight),  # what a stopping gateway waits for
            "catalog": {
                "tools": len(self.catalog.tools),
                "resources": len(self.catalog.resources) + len(self.catalog.templates),
                "prompts": len(self.catalog.prompts),
                "active_by_default": len(self.catalog.active_tools(None)),
            },
            "collisions": self.catalog.collisions,
            "servers": [
                {
                    "namespace": c.spec.namespace,
                    "transport": c.target.transport,
                    "target": c.target.command or c.target.url or c.spec.label,
                    **({"registry": c.spec.registry, "version": c.spec.version or "latest"} if c.spec.registry else {}),
                    "state": c.state,
                    "restarts": c.restarts,
                    "last_error": c.last_error or None,
                    "tools": len(c.listing.tools),
                }
                for c in self.connections
            ],
        }
