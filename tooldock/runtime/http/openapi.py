"""A typed OpenAPI 3.1 document per namespace, generated from its tools' schemas: one operation per tool
(`POST /tools/{name}`), the request body from `inputSchema`, the 200 response from `outputSchema` (as
the REST layer returns it: `{"result": ...}`, unwrapped when fastmcp wrapped it), errors documented.

`$defs` inside a tool's schemas move to `components/schemas` under a per-tool prefix, and their `$ref`s
are rewritten, so tools with same-named models do not collide.

Also what FastAPI cannot see in the gateway's own document (`gateway_openapi`): the bearer scheme, the
call endpoints' bodies (they read them themselves) and answers, `/reload`'s header.
"""

from __future__ import annotations

import copy
from typing import Any

import tooldock
from tooldock.runtime.registry import NamespaceEntry

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}},
        }
    },
}
ERRORS = {
    "400": "Malformed JSON body, or no namespace given",
    "401": "Missing or wrong bearer token",
    "403": "The API key's scope does not cover this namespace or tool",
    "404": "Unknown namespace or tool",
    "409": "An upstream tool that is not activated yet",
    "413": "Body too large",
    "422": "Arguments do not match the input schema",
    "429": "A rate limit was reached (Retry-After says when to retry)",
    "500": "The tool raised, or its worker died during the call",
    "502": "The upstream MCP server failed",
    "503": "The namespace's worker is restarting or unavailable",
    "504": "The call ran past its timeout",
}


def error_responses() -> dict[str, Any]:
    """ERRORS as OpenAPI responses, each `{"error": ...}` (the `Error` component)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    return {code: {"description": text, "content": error} for code, text in ERRORS.items()}


def _hoist(schema: dict[str, Any], prefix: str, components: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    defs = schema.pop("$defs", {}) or {}
    renames = {name: f"{prefix}{name}" for name in defs}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in renames:
                node = {**node, "$ref": f"#/components/schemas/{renames[ref[8:]]}"}
            return {k: rewrite(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for name, definition in defs.items():
        components[renames[name]] = rewrite(definition)
    return rewrite(schema)


def _result_schema(tool: dict[str, Any], components: dict[str, Any], prefix: str) -> dict[str, Any]:
    output = tool.get("outputSchema")
    if not output:
        value: dict[str, Any] = {}
    else:
        output = _hoist(output, prefix, components)
        wrapped = output.pop("x-fastmcp-wrap-result", False)
        value = (output.get("properties") or {}).get("result", {}) if wrapped else output
    return {"type": "object", "required": ["result"], "properties": {"result": value}}


def namespace_openapi(
    entry: NamespaceEntry, server_url: str, header: bool, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The document for one namespace; `header`: operations take the `X-Namespace` header (served at
    `/openapi.json`) rather than a path prefix (served at `/ns/{namespace}/openapi.json`). `tools`: the
    ones to document when not all of them (what an API key's scope lets the caller see)."""
    name = entry.source.name
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, Any] = {}
    for tool in entry.tools if tools is None else tools:
        prefix = "".join(part.capitalize() for part in tool["name"].split("_")) + "_"
        operation: dict[str, Any] = {
            "operationId": tool["name"],
            "summary": tool.get("title") or tool["name"],
            "description": tool.get("description") or "",
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": _hoist(tool.get("inputSchema") or {"type": "object"}, prefix, components)
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "The tool's result",
                    "content": {"application/json": {"schema": _result_schema(tool, components, prefix)}},
                },
                **error_responses(),
            },
        }
        if header:
            operation["parameters"] = [
                {"name": "X-Namespace", "in": "header", "required": True, "schema": {"type": "string", "enum": [name]}}
            ]
        paths[f"/tools/{tool['name']}"] = {"post": operation}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"ToolDock namespace {name}",
            "version": entry.source.config.version or tooldock.__version__,
            "description": entry.source.config.description or f"The tools of namespace {name}.",
        },
        "servers": [{"url": server_url}],
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }


def gateway_openapi(doc: dict[str, Any]) -> dict[str, Any]:
    """The gateway's own document, with the bearer scheme declared (the token check is middleware, so
    FastAPI does not know it) for every operation but `/health`: Swagger UI's Authorize button uses it."""
    doc = copy.deepcopy(doc)
    components = doc.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {"type": "http", "scheme": "bearer"}
    components.setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    doc["security"] = [{"bearer": []}]
    paths = doc.get("paths") or {}
    for path in CALL_PATHS:  # what a call answers, as a namespace's document says it per tool
        operation = paths.get(path, {}).get("post")
        if operation is not None:
            operation["responses"] = {"200": CALL_RESULT, **error_responses()}
    for operation in paths.get("/health", {}).values():
        operation["security"] = []
    return doc


# The bodies the call endpoints read themselves (FastAPI sees no body parameter, so it would declare none
# and Swagger UI's "Try it out" could send none). A namespace's own document types each tool's arguments.
VAULT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "description": "The tool to call"},
                        "arguments": {"type": "object", "description": "The tool's arguments", "default": {}},
                    },
                },
                "example": {"name": "tool_name", "arguments": {}},
            }
        },
    }
}
ARGUMENTS_BODY = {
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "The tool's arguments (typed per tool in /ns/{namespace}/openapi.json)",
                },
                "example": {},
            }
        },
    }
}
CALL_PATHS = ("/tools/call", "/ns/{namespace}/tools/call", "/tools/{name}", "/ns/{namespace}/tools/{name}")
CALL_RESULT = {
    "description": "The tool's result as plain JSON (typed per tool in /ns/{namespace}/openapi.json)",
    "content": {
        "application/json": {
            "schema": {"type": "object", "required": ["result"], "properties": {"result": {}}},
        }
    },
}
MANAGER_TOKEN = {
    "parameters": [
        {
            "name": "X-Manager-Token",
            "in": "header",
            "required": True,
            "schema": {"type": "string"},
            "description": "MANAGER_INTERNAL_TOKEN",
        }
    ]
}
