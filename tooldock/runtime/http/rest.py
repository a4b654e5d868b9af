"""REST endpoints (seed 000, "Endpoints"): `/tools`, `/tools/{name}`, `/tools/{name}/schema`,
`/namespaces`, `/health`, `/reload`. Routing by the `X-Namespace` header; no "all tools" namespace."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Header, Request

from tooldock.errors import BadRequest, Forbidden, PayloadTooLarge, ToolDockError, ToolFailed
from tooldock.keys import ApiKey
from tooldock.runtime import jsonin, requestid
from tooldock.runtime.access import key_of, restricted
from tooldock.runtime.disconnect import cancelled_on_disconnect
from tooldock.runtime.engine import Engine
from tooldock.runtime.http.auth import token_matches
from tooldock.runtime.http.gatewaydoc import ARGUMENTS_BODY, MANAGER_TOKEN, VAULT_BODY, gateway_openapi
from tooldock.runtime.http.openapi import namespace_openapi
from tooldock.runtime.observe import call_info
from tooldock.runtime.settings import Settings
from tooldock.runtime.versions import version_of_tool
from tooldock.state import replica_name
from tooldock.worker.protocol import error_text

log = logging.getLogger("tooldock.http")
NamespaceHeader = Header(default=None, alias="X-Namespace", description="The namespace to use, e.g. multi-tool")


def rest_value(result: dict[str, Any], descriptor: dict[str, Any]) -> Any:
    """The tool's return value as plain JSON: structured content, unwrapped when fastmcp wrapped it. An
    `isError` result (an upstream server's tool failed; a worker's failure is ToolFailed already) is a 500,
    as a worker tool's failure is, not a 200 carrying the error text."""
    if result.get("isError"):
        raise ToolFailed(error_text(result) or "the tool failed")
    structured = result.get("structuredContent")
    if structured is not None:
        if (descriptor.get("outputSchema") or {}).get("x-fastmcp-wrap-result") and isinstance(structured, dict):
            return structured.get("result")
        return structured
    content = result.get("content") or []
    if len(content) == 1 and content[0].get("type") == "text":
        return content[0].get("text")
    return content or None


async def read_json_body(request: Request, limit: int) -> Any:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"request body is larger than {limit} bytes (TOOLDOCK_MAX_BODY_BYTES)")
    if not body.strip():
        return {}
    return jsonin.loads(bytes(body))


async def call_rest(
    engine: Engine, max_body: int, namespace: str | None, name: str, request: Request, arguments: Any = None
) -> dict[str, Any]:
    """`POST /tools/{name}`: the FastAPI route's work, and the hot route's (runtime.http.hotrest). `arguments`:
    the body already read (Tool Vault's `/tools/call` reaching a tool named `call`)."""
    key = key_of(request.scope)
    with call_info(front_end="rest", client=request.client.host if request.client else None):
        try:
            descriptor = _descriptor(engine, namespace, name, request)
        except ToolDockError as err:
            engine.refused(namespace, name, err, key)
            raise
        if arguments is None:
            arguments = await read_json_body(request, max_body)
        wants_traceback = request.headers.get("x-tooldock-traceback") == "1"
        result = await engine.call_tool(namespace, name, arguments, traceback=wants_traceback, key=key)
    return {"result": rest_value(result, descriptor)}


def _descriptor(engine: Engine, namespace: str | None, name: str, request: Request) -> dict[str, Any]:
    """The tool a REST request names: the version it asks for (`?version=`, runtime/versions.py), or the one
    listed."""
    key, version = key_of(request.scope), _version_asked(request)
    if version is None:
        return engine.get_tool(namespace, name, key=key)
    return version_of_tool(engine, namespace, name, version, key)


def _version_asked(request: Request) -> str | None:
    """The tool version a REST call asks for (`?version=2`), if any: one, not empty."""
    if not request.scope.get("query_string"):
        return None
    asked = request.query_params.getlist("version")
    if not asked:
        return None
    if len(asked) > 1 or not asked[0] or len(asked[0]) > 200:
        raise BadRequest(
            "`version` names one version of the tool (for example ?version=2), at most 200 characters; "
            "leave it out to run the highest"
        )
    return asked[0]


def is_vault_call(body: Any) -> bool:
    """Whether a `POST /tools/call` body is Tool Vault's `{"name": "<tool>", "arguments": {...}}`."""
    return isinstance(body, dict) and isinstance(body.get("name"), str) and set(body) <= {"name", "arguments"}


# How an endpoint learns its namespace (the X-Namespace header or the path), and the endpoints it wraps.
NamespaceOf = Callable[..., Awaitable[str | None]]
Endpoint = Callable[..., Awaitable[dict[str, Any]]]


# async: FastAPI runs a plain `def` dependency in a worker thread, a thread hop per request for nothing.
async def _from_header(x_namespace: str | None = NamespaceHeader) -> str | None:
    return x_namespace


async def _from_path(namespace: str) -> str:
    return namespace


def _wrap(fn: Callable[..., Awaitable[dict[str, Any]]], ns_of: NamespaceOf) -> Endpoint:
    async def endpoint(request: Request, namespace: str | None = Depends(ns_of)) -> dict[str, Any]:
        return await fn(namespace, key_of(request.scope))

    return endpoint


def _wrap_request(fn: Callable[..., Awaitable[dict[str, Any]]], ns_of: NamespaceOf) -> Endpoint:
    async def endpoint(request: Request, namespace: str | None = Depends(ns_of)) -> dict[str, Any]:
        return await fn(namespace, request)

    return endpoint


def _wrap_name_request(fn: Callable[..., Awaitable[dict[str, Any]]], ns_of: NamespaceOf) -> Endpoint:
    async def endpoint(name: str, request: Request, namespace: str | None = Depends(ns_of)) -> dict[str, Any]:
        return await fn(namespace, name, request)

    return endpoint


def create_router(engine: Engine, settings: Settings) -> APIRouter:
    router = APIRouter()

    @router.get("/health", summary="Liveness and namespace health (no auth)")
    async def health() -> dict[str, Any]:
        entries = engine.registry.snapshot.entries
        unhealthy = {n: e.state for n, e in entries.items() if e.state not in ("ready", "empty", "sleeping")}
        return {
            "status": "degraded" if unhealthy else "ok",
            "namespaces": len(entries),
            "unhealthy": unhealthy,
            "generation": engine.registry.snapshot.generation,
            "replica": replica_name(),
            "state": engine.admission.store.kind,
        }

    @router.get("/namespaces", summary="List namespaces with their state, tools and problems")
    async def namespaces(request: Request) -> dict[str, Any]:
        snapshot, key = engine.registry.snapshot, restricted(key_of(request.scope))
        # Each namespace with the tools it exposes (`tools: {allow, deny}`) and, for an API key, only the
        # namespaces and tools its scope allows: a hidden tool is not named here either.
        listed = []
        for name in engine.namespaces(key):
            tools = engine.visible(name, snapshot.entries[name].tools, key)
            listed.append({**snapshot.entries[name].status(), "tools": [t["name"] for t in tools]})
            listed[-1]["tool_count"] = len(tools)
        problems = [p.to_dict() for p in snapshot.problems if key is None or key.allows_namespace(p.file.split("/")[0])]
        replica = {"name": replica_name(), "generation": snapshot.generation}  # which replica answered, at which reload
        return {"namespaces": listed, "problems": problems, "replica": replica}

    async def list_tools(namespace: str | None, key: ApiKey | None) -> dict[str, Any]:
        entry = engine.namespace(namespace, key)
        return {"namespace": entry.source.name, "tools": engine.visible(entry.source.name, entry.tools, key)}

    async def tool_schema(namespace: str | None, name: str, request: Request) -> dict[str, Any]:
        return _descriptor(engine, namespace, name, request)

    async def call_tool(namespace: str | None, name: str, request: Request) -> dict[str, Any]:
        with cancelled_on_disconnect(request.scope):
            return await call_rest(engine, settings.max_body_bytes, namespace, name, request)

    async def vault_call(namespace: str | None, request: Request) -> dict[str, Any]:
        """Tool Vault (seed 004): `{"name": ..., "arguments": {...}}` in the body."""
        key = key_of(request.scope)
        entry = engine.namespace(namespace, key)
        body = await read_json_body(request, settings.max_body_bytes)
        if not is_vault_call(body):
            # A tool of the namespace named `call` (its OpenAPI path is this one): any other body is its arguments.
            if any(t["name"] == "call" for t in engine.visible(entry.source.name, entry.tools, key)):
                with cancelled_on_disconnect(request.scope):
                    return await call_rest(engine, settings.max_body_bytes, namespace, "call", request, body)
            raise BadRequest('the body must be {"name": "<tool>", "arguments": {...}}')
        with call_info(front_end="rest", client=request.client.host if request.client else None):
            try:
                descriptor = engine.get_tool(namespace, body["name"], key=key)
            except ToolDockError as err:
                engine.refused(namespace, body["name"], err, key)
                raise
            with cancelled_on_disconnect(request.scope):
                result = await engine.call_tool(namespace, body["name"], body.get("arguments") or {}, key=key)
        return {"result": rest_value(result, descriptor)}

    # The same endpoints twice: routed by the X-Namespace header, and under /ns/{namespace}/ for clients
    # that cannot send headers. Tool Vault's /tools/list and /tools/call come before /tools/{name}.
    for prefix, ns_of in (("", _from_header), ("/ns/{namespace}", _from_path)):
        router.add_api_route(
            f"{prefix}/tools", _wrap(list_tools, ns_of), methods=["GET"], summary="List the tools of a namespace"
        )
        router.add_api_route(
            f"{prefix}/tools/list", _wrap(list_tools, ns_of), methods=["GET"], summary="Tool Vault alias of GET /tools"
        )
        router.add_api_route(
            f"{prefix}/tools/call",
            _wrap_request(vault_call, ns_of),
            methods=["POST"],
            summary='Tool Vault call: {"name", "arguments"}',
            openapi_extra=VAULT_BODY,
        )
        router.add_api_route(
            f"{prefix}/tools/{{name:path}}/schema",
            _wrap_name_request(tool_schema, ns_of),
            methods=["GET"],
            summary="One tool's full descriptor and input schema",
        )
        router.add_api_route(
            f"{prefix}/tools/{{name:path}}",  # a name may hold "/" (an upstream server's, or @tool(name=...))
            _wrap_name_request(call_tool, ns_of),
            methods=["POST"],
            summary="Call a tool; the body is a JSON object of arguments",
            openapi_extra=ARGUMENTS_BODY,
        )

    @router.get("/openapi.json", include_in_schema=False)
    async def openapi_by_header(request: Request, x_namespace: str | None = NamespaceHeader) -> dict[str, Any]:
        if x_namespace is None:  # no namespace: the gateway's own API
            return gateway_openapi(request.app.openapi())
        entry, key = engine.namespace(x_namespace, key_of(request.scope)), key_of(request.scope)
        tools = engine.visible(entry.source.name, entry.tools, key)
        return namespace_openapi(entry, str(request.base_url).rstrip("/"), header=True, tools=tools)

    @router.get("/ns/{namespace}/openapi.json", include_in_schema=False)
    async def openapi_by_path(namespace: str, request: Request) -> dict[str, Any]:
        entry, key = engine.namespace(namespace, key_of(request.scope)), key_of(request.scope)
        tools = engine.visible(entry.source.name, entry.tools, key)
        return namespace_openapi(
            entry, f"{str(request.base_url).rstrip('/')}/ns/{entry.source.name}", header=False, tools=tools
        )

    @router.post(
        "/reload",
        summary="Rescan the tools directory (bearer + X-Manager-Token + allowed source)",
        openapi_extra=MANAGER_TOKEN,
    )
    async def reload(request: Request, retry_failed: bool = True) -> dict[str, Any]:
        """`retry_failed=false` (a file watcher's reload): a namespace that failed and has not changed since is
        left as it is, not started again."""
        if restricted(key_of(request.scope)) is not None:
            raise Forbidden("reload takes the bearer token or an admin API key without globs")
        if settings.manager_token is None:
            raise Forbidden("reload over HTTP is disabled: set MANAGER_INTERNAL_TOKEN (or send SIGHUP)")
        if not token_matches(request.headers.get("x-manager-token"), settings.manager_token):
            raise Forbidden("missing or invalid X-Manager-Token")
        client = request.client.host if request.client else ""
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            raise Forbidden("reload is only accepted from INTERNAL_ALLOWED_CIDRS") from None
        if not any(address in net for net in settings.internal_allowed_cidrs):
            raise Forbidden(f"reload is not accepted from {client}: not in INTERNAL_ALLOWED_CIDRS")
        rid = requestid.of_scope(request)
        log.info("reload over HTTP from %s (request %s)", client, rid, extra={"request_id": rid})
        return await engine.registry.reload(retry_failed)

    return router
