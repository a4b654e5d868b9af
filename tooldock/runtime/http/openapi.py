"""A typed OpenAPI 3.1 document per namespace, generated from its tools' schemas: one operation per tool
(`POST /tools/{name}`), the request body from `inputSchema`, the 200 response from `outputSchema` (as
the REST layer returns it: `{"result": ...}`, unwrapped when fastmcp wrapped it), errors documented; a
versioned tool's operation takes a `version` query parameter (its listed version's schemas are shown).

`$defs` inside a tool's schemas move to `components/schemas` under a per-tool prefix, and their `$ref`s
are rewritten, so tools with same-named models do not collide.

The gateway's own document is gatewaydoc.py's.
"""

from __future__ import annotations

import copy
from typing import Any

import tooldock
from tooldock.namespace.versions import listed_versions
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


def error_responses(codes: tuple[str, ...] | None = None) -> dict[str, Any]:
    """ERRORS (those of `codes`, when given) as OpenAPI responses, each `{"error": ...}` (the `Error`
    component)."""
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    return {
        code: {"description": text, "content": error} for code, text in ERRORS.items() if codes is None or code in codes
    }


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
        parameters = []
        if header:
            parameters.append(
                {"name": "X-Namespace", "in": "header", "required": True, "schema": {"type": "string", "enum": [name]}}
            )
        if len(versions := listed_versions(tool.get("_meta"))) > 1:  # `@tool(version=...)`: each can be run
            parameters.append(
                {
                    "name": "version",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": versions},
                    "description": "The version of the tool to run; the highest when left out (the schemas "
                    "shown are the highest version's)",
                }
            )
        if parameters:
            operation["parameters"] = parameters
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
