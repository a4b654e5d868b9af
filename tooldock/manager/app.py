"""Wire the manager: its tools on the SDK's MCPServer, served over the gateway's own MCP stack (streamable
HTTP in every protocol version through `McpHub`, legacy SSE through `LegacySse`, the same bearer auth), plus
`/health` and the optional file watcher.

The manager is its own process: it needs write access to the tools directory (and, on the docker backend,
the Docker socket); the gateway needs neither. It changes the gateway only through `POST /reload`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

import tooldock
from tooldock.keys import KeyStore
from tooldock.manager import context, tools_builder, tools_files, tools_install, tools_ops
from tooldock.manager.arguments import argument_check
from tooldock.manager.context import Manager
from tooldock.manager.gateway import GatewayClient
from tooldock.manager.rebuild import DockerRebuild
from tooldock.manager.reload import Reloader
from tooldock.manager.seed import deploy_all
from tooldock.manager.settings import ManagerSettings
from tooldock.manager.watcher import watch
from tooldock.manager.workspace import Workspace
from tooldock.namespace.config import read_config
from tooldock.namespace.scanner import REQUIREMENTS_FILE, requirements_text
from tooldock.runtime.backends.environments import Environments
from tooldock.runtime.http.auth import BearerAuth
from tooldock.runtime.http.edge import RequestEdge
from tooldock.runtime.http.oauth import ProtectedResourceMetadata, manager_gate
from tooldock.runtime.mcp.caller import with_request_id
from tooldock.runtime.mcp.legacy import MESSAGES_PATH, LegacySse
from tooldock.runtime.mcp.server import McpHub
from tooldock.runtime.observe import AuditLog, tracing
from tooldock.secrets import SecretStore

SYSTEM = "_system"  # the manager's one MCP server; the name no namespace may take
INSTRUCTIONS = (
    "ToolDock manager: write Python tools for the ToolDock gateway. Workflow: list_namespaces -> "
    "create_namespace -> write_tool (follow its pattern exactly) -> add_requirement if the code imports "
    "third-party packages (write_tool's missing_packages names them) -> check_secrets (prepare_secret + ask "
    "the user to run the command it gives; never ask for secret values in chat) -> reload_core -> test_tool. "
    "Fix failures with write_tool and repeat. To translate an existing server: analyze_repo / "
    "install_from_registry -> read_repo_file -> the same steps; to serve one as it is: search_registry -> "
    "install_from_registry(mode='upstream') -> reload_core."
)


class _System:
    """An ASGI endpoint that hands every request to one of the hub's handlers as the `_system` server's."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handler(SYSTEM, scope, receive, send)


def _process_installer(envs: Environments) -> Any:
    async def install(folder: Path) -> None:
        config, _ = read_config(folder)
        requirements = folder / REQUIREMENTS_FILE
        await envs.ensure(folder.name, requirements, requirements_text(requirements), config.python)

    return install


def build_manager(settings: ManagerSettings, cache: Path, port: int) -> Manager:
    workspace = Workspace(settings.tools_dir)
    runtime = settings.runtime
    gateway = GatewayClient(settings.gateway_url, runtime.bearer_token, runtime.manager_token)
    docker = DockerRebuild(workspace, runtime, cache, settings.base_image) if settings.backend == "docker" else None
    # The process backend: the same environment cache the gateway uses, so an install here is a no-op there.
    envs: Environments | None = None
    if docker is not None:
        installer = docker.install
    else:
        envs = Environments(runtime.state_dir / "envs")
        installer = _process_installer(envs)
    store, reloader = SecretStore.from_env(), Reloader(gateway, docker)
    return Manager(settings, workspace, store, gateway, reloader, installer, docker, port, envs=envs)


def mcp_server(manager: Manager) -> MCPServer:
    server = MCPServer("tooldock-manager", version=tooldock.__version__, instructions=INSTRUCTIONS)
    tools_files.register(server, manager)
    tools_ops.register(server, manager)
    tools_install.register(server, manager, tools_builder.register(server, manager))
    return server


def lowlevel(server: MCPServer) -> Server[Any]:
    """The SDK's low-level server behind MCPServer, which the gateway's MCP stack serves. The SDK has no
    public accessor; MCPServer's own `streamable_http_app()` would bypass ToolDock's 2025-03-26 rules."""
    low: Server[Any] = server._lowlevel_server
    return low


def create_manager_app(settings: ManagerSettings, cache: Path, host: str = "127.0.0.1", port: int = 8001) -> Starlette:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per gateway request otherwise
    manager = build_manager(settings, cache, port)
    tools = mcp_server(manager)
    server = lowlevel(tools)
    server.middleware.append(with_request_id)  # test_tool's and reload_core's calls carry the request's id
    server.middleware.append(argument_check(tools))  # unknown or missing argument names: a clear tool error
    hub = McpHub(None, settings.runtime, host, servers=lambda _name: server)
    legacy = LegacySse(hub, settings.runtime.max_body_bytes)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "service": "tooldock-manager", "version": tooldock.__version__})

    context.AUDIT = audit = AuditLog(settings.runtime.log_dir, settings.runtime.log_retention_days)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tracing.setup(service="tooldock-manager")  # the SDK's span per MCP request, and traceparent to the gateway
        audit.start()
        watcher = None
        if settings.watch:
            watcher = await watch(settings.tools_dir, manager.reloader, settings.debounce_ms, manager.store.directory)
        first = None
        if settings.seed_dir is not None and manager.docker is not None:  # compose: deploy what is there
            first = asyncio.create_task(deploy_all(manager.reloader))
        try:
            async with hub.run():
                yield
        finally:
            if first is not None:
                first.cancel()
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watcher
            await manager.gateway.close()
            audit.close()
            tracing.shutdown()

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/mcp", _System(hub.handle), methods=["GET", "POST", "DELETE"]),
    ]
    if settings.runtime.enable_legacy_mcp:
        routes += [
            Route("/sse", _System(legacy.stream), methods=["GET"]),
            Route(MESSAGES_PATH, _System(legacy.message), methods=["POST"]),
        ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.manager = manager
    # The bearer token, or an admin API key without globs: the manager can write any namespace.
    # With TOOLDOCK_OAUTH_ISSUER, also an access token for the manager's own resource granting admin.
    oauth = manager_gate(settings.runtime, f"http://{host}:{port}")
    keys = KeyStore.from_env()
    app.add_middleware(BearerAuth, token=settings.runtime.bearer_token, keys=keys, admin_only=True, oauth=oauth)
    if oauth is not None:  # its protected resource metadata, as the gateway's (RFC 9728)
        app.add_middleware(ProtectedResourceMetadata, config=oauth.config)
    app.add_middleware(RequestEdge)  # outermost: a request id on every answer, 401s included; no traceback out
    print(
        f"tooldock manager: tools in {settings.tools_dir}, gateway at {settings.gateway_url} "
        f"({settings.backend} backend)",
        file=sys.stderr,
        flush=True,
    )
    return app
