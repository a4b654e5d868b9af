"""Wire the gateway: registry + backend + engine, the REST router, the MCP endpoint, the relay socket, auth,
errors."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

import tooldock
from tooldock.dashboard import DashboardPages
from tooldock.errors import BadRequest, ToolDockError
from tooldock.keys import KeyStore
from tooldock.runtime.access import key_of
from tooldock.runtime.admission import Admission
from tooldock.runtime.backend import Backend, Delegating
from tooldock.runtime.backends.process import ProcessBackend
from tooldock.runtime.engine import Engine
from tooldock.runtime.http.auth import BearerAuth
from tooldock.runtime.http.cors import with_cors
from tooldock.runtime.http.dashboard import include_dashboard
from tooldock.runtime.http.docs import DocsPages, LocalSwagger
from tooldock.runtime.http.drain import Drain
from tooldock.runtime.http.edge import RequestEdge
from tooldock.runtime.http.hotrest import RestCall
from tooldock.runtime.http.metrics import MetricsEndpoint
from tooldock.runtime.http.oauth import ProtectedResourceMetadata, ScopeChallenge, TokenGate, token_gate
from tooldock.runtime.http.responses import error_response
from tooldock.runtime.http.rest import create_router
from tooldock.runtime.keyguard import KeyGuard
from tooldock.runtime.mcp.legacy import MESSAGES_PATH, LegacySse
from tooldock.runtime.mcp.server import McpHub
from tooldock.runtime.observe import AuditLog, Metrics, tracing
from tooldock.runtime.registry import Registry
from tooldock.runtime.relay.config import RelayConfig
from tooldock.runtime.relay.methods import RelayMethods
from tooldock.runtime.relay.server import RelayServer
from tooldock.runtime.reloads import Reloads, serving
from tooldock.runtime.secretmap import SecretMap
from tooldock.runtime.settings import Settings
from tooldock.state import open_store, replica_name


class NamespacedEndpoint:
    """Resolve the namespace (the `X-Namespace` header, or `{namespace}` in `/ns/{namespace}/...`; 400/404
    in ToolDock's error shape, 403 when the caller's API key does not cover it), then hand the raw ASGI
    request on: `/mcp` to the namespace's SDK session manager, `/sse` and `/messages` to the legacy transport."""

    def __init__(self, engine: Engine, handler: Callable[[str, Scope, Receive, Send], Awaitable[None]]) -> None:
        self.engine, self.handler = engine, handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = (scope.get("path_params") or {}).get("namespace") or Request(scope).headers.get("x-namespace")
        try:
            entry = self.engine.namespace(name, key_of(scope))
        except ToolDockError as err:
            await error_response(err)(scope, receive, send)
            return
        await self.handler(entry.source.name, scope, receive, send)


class HotRoutes:
    """The busiest routes, matched before FastAPI: `/mcp` and `/ns/{namespace}/mcp` (the MCP transport uses
    none of FastAPI's routing, dependency or exception layers, which cost about a fifth of a lean MCP call)
    and, with `rest`, `POST /tools/{name}` (runtime.http.hotrest). Other methods and paths go on to FastAPI,
    which lists these routes too (its 405 answers, its OpenAPI document)."""

    def __init__(self, app: ASGIApp, mcp: NamespacedEndpoint, rest: RestCall | None) -> None:
        self.app, self.mcp, self.rest = app, mcp, rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "POST", "DELETE"):
            path, root = scope["path"], scope.get("root_path") or ""
            if root and path.startswith(root):
                path = path[len(root) :]
            namespace = None
            if path.startswith("/ns/"):
                namespace, _, rest = path[4:].partition("/")
                path = "/" + rest
            if path == "/mcp" and namespace != "":
                if namespace is not None:
                    scope["path_params"] = {"namespace": namespace}
                await self.mcp(scope, receive, send)
                return
            if self.rest is not None and scope["method"] == "POST" and path.startswith("/tools/") and namespace != "":
                name = path[7:]  # may hold "/" (sent as is or as %2F): no other POST route lies below /tools/
                if name and name != "call":  # /tools/call is Tool Vault's (rest.create_router's vault_call)
                    await self.rest(scope, receive, send, namespace, name)
                    return
        await self.app(scope, receive, send)


def observe(engine: Engine, registry: Registry, hub: McpHub, settings: Settings) -> tuple[AuditLog, Metrics]:
    """The audit log and the metrics: the engine records every call; the rest is read when scraped."""
    audit, metrics = AuditLog(settings.log_dir, settings.log_retention_days), Metrics()
    engine.audit, engine.metrics = audit, metrics
    registry.reload_timings.append(metrics.reloads.observe)

    def states() -> list[tuple[list[str], float]]:
        return [([n, e.state], 1.0) for n, e in registry.snapshot.entries.items()]

    def counts(field: str) -> list[tuple[list[str], float]]:
        rows = []
        for name, entry in registry.snapshot.entries.items():
            value = entry.worker.status().get(field) if entry.worker is not None else None
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append(([name], float(value)))
        return rows

    metrics.gauge("tooldock_namespace_state", "1 for each namespace's current state", ["namespace", "state"], states)
    metrics.gauge("tooldock_worker_restarts", "Worker restarts", ["namespace"], lambda: counts("restarts"))
    metrics.gauge(
        "tooldock_worker_last_wake_ms", "Last scale-to-zero wake-up (ms)", ["namespace"], lambda: counts("last_wake_ms")
    )
    metrics.gauge(
        "tooldock_mcp_sessions",
        "Open MCP sessions",
        ["namespace"],
        lambda: [([n], float(c)) for n, c in hub.session_counts().items()],
    )
    if hub.lean is not None:
        served = hub.lean.served
        metrics.counter(
            "tooldock_mcp_lean_requests",
            "MCP requests answered by the lean path (without the SDK), by method and protocol version",
            ["method", "protocol"],
            lambda: [([method, protocol], float(n)) for (method, protocol), n in list(served.items())],
        )
    metrics.gauge(
        "tooldock_audit_lines_dropped",
        "Audit lines that could not be written",
        [],
        lambda: [([], float(audit.dropped))],
    )
    return audit, metrics


def make_backend(name: str, settings: Settings, tools_dir: Path, read_only: bool = False) -> Backend:
    if name == "docker":
        from tooldock.runtime.backends.docker import DockerBackend

        return DockerBackend(settings, read_only=read_only, tools_dir=tools_dir)
    if name == "network":
        from tooldock.runtime.backends.network import NetworkBackend

        return NetworkBackend.from_env(settings)
    return ProcessBackend(settings, tools_dir)


def create_app(
    tools_dir: Path,
    settings: Settings,
    host: str = "127.0.0.1",
    url: str = "",
    backend_name: str = "process",
    read_only: bool = False,
    secrets: SecretMap | None = None,
    keys: KeyStore | None = None,
    relay: RelayConfig | None = None,
    backend: Backend | None = None,
    drain: Drain | None = None,
) -> ASGIApp:
    """`keys`: the API key store (default: TOOLDOCK_KEYS_DIR's); `relay`: the relay socket's settings (default:
    from the environment); `backend`: one made already (`tooldock serve` warms the process backend up before
    it imports this module), else `backend_name`'s; `drain`: how it stops (`tooldock serve` runs it)."""
    keys = keys or KeyStore.from_env()
    relay = relay or RelayConfig.from_env(settings)
    backend = backend or make_backend(backend_name, settings, tools_dir, read_only)
    registry = Registry(backend, settings, secrets)
    guard = KeyGuard(keys)  # ends what outlives a revoked key: calls in flight, HTTP event streams, relay watchers
    store = open_store(settings.state_url.url if settings.state_url is not None else None)
    engine = Engine(registry, settings, guard)
    engine.admission = Admission(store)  # the rate limits' buckets, shared by replicas when the store is
    hub = McpHub(engine, settings, host)
    registry.listeners.append(hub.tools_changed)
    audit, metrics = observe(engine, registry, hub, settings)
    registry.resource_listeners.append(hub.resource_updated)
    relay_server = RelayServer(relay, RelayMethods(engine, keys), guard)
    registry.listeners.append(relay_server.tools_changed)
    metrics.gauge(
        "tooldock_relay_connections",
        "Clients connected to the relay socket",
        [],
        lambda: [([], float(relay_server.connections))],
    )

    reloads = Reloads(registry)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.watch and backend.name == "process":  # first: an edit made while workers start is seen
            await reloads.on_edits(tools_dir, settings.watch_debounce_ms, secrets.store.directory if secrets else None)
        report = await registry.reload(announce=False)
        where = {"process": tools_dir, "network": "network workers"}.get(backend.name, "docker containers")
        for line in serving(report, registry, where):
            print(f"tooldock: {line}", file=sys.stderr, flush=True)
        reloads.on_sighup()
        if not isinstance(backend, Delegating):  # attached replicas follow the worker owner's manifest instead
            reloads.share(store, replica_name())
        reloads.on_backend_changes(backend)
        await relay_server.start()
        audit.start()
        tracing.setup()  # when OTEL_* asks for traces and the OpenTelemetry SDK is installed
        # What start-up made (the imported framework, the app, the first snapshot: over 100,000 objects)
        # leaves the collector's reach, so a full collection scans only what serving made since. Before,
        # each took 70-85 ms, about once a second at 16 concurrent MCP calls, and set p99 latency there:
        # 70 ms against 10 ms with the freeze (wrk, two gateways in turn; throughput unchanged). The cost:
        # what of it later becomes garbage inside a reference cycle is never freed (once, bounded).
        gc.freeze()
        if url:
            print(f"tooldock: ready on {url} (MCP at {url}/mcp, REST at {url}/tools)", file=sys.stderr, flush=True)
        try:
            async with hub.run():
                yield
        finally:
            await reloads.close()
            await relay_server.close()
            await guard.close()
            await registry.close()
            await backend.close()
            await store.close()
            audit.close()
            tracing.shutdown()

    app = FastAPI(
        title="ToolDock",
        version=tooldock.__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # /openapi.json is served by the REST router: per namespace, or the gateway's own
    )
    app.state.registry, app.state.engine = registry, engine

    @app.exception_handler(ToolDockError)
    async def on_tooldock_error(request: Request, err: ToolDockError) -> Response:
        return error_response(err)

    @app.exception_handler(HTTPException)
    async def on_http_error(request: Request, exc: HTTPException) -> Response:
        err = ToolDockError(str(exc.detail))
        err.status, err.code = exc.status_code, "not_found" if exc.status_code == 404 else "http_error"
        return error_response(err, dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, exc: RequestValidationError) -> Response:
        return error_response(BadRequest(f"invalid request: {exc.errors()}"))

    app.include_router(create_router(engine, settings))
    include_dashboard(app, engine, keys, audit, secrets)  # /whoami, /keys, /audit, /secrets: the dashboard's
    oauth: TokenGate | None = token_gate(settings, url)  # TOOLDOCK_OAUTH_ISSUER: access tokens too
    mcp = ScopeChallenge(engine, hub.handle, settings.max_body_bytes) if oauth is not None else hub.handle
    for prefix in ("", "/ns/{namespace}"):
        legacy = LegacySse(hub, settings.max_body_bytes, in_path=bool(prefix))
        app.router.routes.append(
            Route(f"{prefix}/mcp", endpoint=NamespacedEndpoint(engine, mcp), methods=["GET", "POST", "DELETE"])
        )
        if settings.enable_legacy_mcp:
            app.router.routes.append(
                Route(f"{prefix}/sse", endpoint=NamespacedEndpoint(engine, legacy.stream), methods=["GET"])
            )
            app.router.routes.append(
                Route(f"{prefix}{MESSAGES_PATH}", endpoint=NamespacedEndpoint(engine, legacy.message), methods=["POST"])
            )
    # The middlewares wrap FastAPI from outside (not `add_middleware`, which nests them inside its exception
    # layers), so the MCP endpoint can be reached past FastAPI's routing (HotRoutes); RequestEdge answers
    # any failure. Outermost first: request ids, /metrics, CORS preflights, docs pages, auth.
    rest = RestCall(engine, settings.max_body_bytes) if settings.lean_rest else None
    front: ASGIApp = HotRoutes(app, NamespacedEndpoint(engine, mcp), rest)
    front = BearerAuth(front, token=settings.bearer_token, keys=keys, guard=guard, oauth=oauth)
    if oauth is not None:
        front = ProtectedResourceMetadata(front, oauth.config)
    # The Swagger UI pages (and, with TOOLDOCK_SWAGGER_UI_DIR, its files) load without a token; the documents need it.
    swagger = LocalSwagger(settings.swagger_ui_dir) if settings.swagger_ui_dir is not None else None
    if swagger is not None:
        print(f"tooldock: /docs serves Swagger UI {swagger.version} from {settings.swagger_ui_dir}", file=sys.stderr)
    front = DocsPages(front, swagger)
    front = DashboardPages(front, oauth=oauth.config if oauth is not None else None)  # /ui/: the web dashboard
    front = with_cors(front, origins=settings.cors_origins)  # preflights are answered before auth
    front = MetricsEndpoint(front, metrics=metrics, token=settings.bearer_token, metrics_token=settings.metrics_token)
    front = (drain or Drain()).wrap(front, registry.calls_in_flight, replica_name())  # SIGTERM: drain, then stop
    return RequestEdge(front)
