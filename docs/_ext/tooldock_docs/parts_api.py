"""Generated parts read off the running code's interfaces: the gateway's OpenAPI document (`http-endpoints`)
and the manager's MCP tools (`manager-tool NAME`), each made the way the program makes it."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from pathlib import Path
from typing import Any

from tooldock_docs.registry import MarkerError, kind, no_args, table

METHODS = ("get", "post", "put", "delete", "patch")


@functools.cache
def gateway_openapi() -> dict[str, Any]:
    """`GET /openapi.json` without `X-Namespace`: the gateway's own document, as the gateway builds it."""
    from fastapi import FastAPI

    import tooldock
    from tooldock.dashboard import keys_router
    from tooldock.keys import KeyStore
    from tooldock.runtime.http.gatewaydoc import gateway_openapi as finish
    from tooldock.runtime.http.rest import create_router
    from tooldock.runtime.settings import Settings

    app = FastAPI(title="ToolDock", version=tooldock.__version__, openapi_url=None)
    app.include_router(create_router(None, Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16})))
    app.include_router(keys_router(KeyStore(Path("keys")), lambda scope: None, lambda line: None, lambda scope: None))
    return finish(app.openapi())


def write_openapi(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gateway.json").write_text(json.dumps(gateway_openapi(), indent=2, sort_keys=True) + "\n")


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    """(METHOD, path, operation) of every operation in the gateway's document, in its order."""
    found = []
    for path, item in gateway_openapi()["paths"].items():
        for method in METHODS:
            if method in item:
                found.append((method.upper(), path, item[method]))
    return found


def _statuses(operation: dict[str, Any]) -> str:
    return ", ".join(sorted(operation.get("responses", {})))


@kind("http-endpoints")
def http_endpoints(args: list[str]) -> str:
    """`<!-- tooldock:http-endpoints -->`: every operation of the gateway's OpenAPI document."""
    no_args(args)
    rows: list[list[object]] = []
    for method, path, operation in operations():
        auth = "none" if operation.get("security") == [] else "bearer token or API key"
        header = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "header"]
        rows.append(
            [
                f"`{method}`",
                f"`{path}`",
                operation.get("summary") or operation.get("description", ""),
                ", ".join(f"`{h}`" for h in header),
                auth,
                _statuses(operation),
            ]
        )
    return (
        table(["method", "path", "what it does", "headers", "auth", "answers"], rows)
        + '\nThe whole document: <a href="../openapi/gateway.json">gateway.json</a> (OpenAPI '
        + f"{gateway_openapi()['openapi']}; the same as `GET /openapi.json` without `X-Namespace`).\n"
    )


@functools.cache
def manager_tools() -> dict[str, dict[str, Any]]:
    """The manager's tools as an MCP client lists them: name -> the tool's MCP descriptor."""
    from tooldock.manager.app import build_manager, mcp_server
    from tooldock.manager.settings import ManagerSettings

    settings = ManagerSettings.from_env(Path("."), env={"TOOLDOCK_BEARER_TOKEN": "x" * 16})
    server = mcp_server(build_manager(settings, Path("."), 8001))
    tools = asyncio.run(server.list_tools())
    return {tool.name: tool.model_dump(by_alias=True, exclude_none=True) for tool in tools}


def _type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    return str(schema.get("type", "any"))


@kind("manager-tool", required=lambda: sorted(manager_tools()))
def manager_tool(args: list[str]) -> str:
    """`<!-- tooldock:manager-tool NAME -->`: the tool's parameters and the description the LLM reads."""
    if len(args) != 1:
        raise MarkerError("name one manager tool")
    tools = manager_tools()
    if args[0] not in tools:
        raise MarkerError(f"the manager has no tool {args[0]!r}; it has {', '.join(sorted(tools))}")
    tool = tools[args[0]]
    schema = tool.get("inputSchema", {})
    required = set(schema.get("required", []))
    rows: list[list[object]] = []
    for name, prop in schema.get("properties", {}).items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        rows.append(
            [f"`{name}`", _type(prop), "yes" if name in required else "no", default, prop.get("description", "")]
        )
    params = table(["parameter", "type", "required", "default", "meaning"], rows) if rows else "No parameters.\n"
    description = inspect.cleandoc(tool.get("description", ""))
    annotations = tool.get("annotations") or {}
    hints = [f"`{k}`" for k, v in sorted(annotations.items()) if v is True]
    return (
        params
        + ("\nAnnotations: " + ", ".join(hints) + ".\n" if hints else "")
        + "\nWhat the LLM reads (the tool's description):\n\n````text\n"
        + (description or "(none)")
        + "\n````\n"
    )


__all__ = ["gateway_openapi", "manager_tools", "operations", "write_openapi"]
