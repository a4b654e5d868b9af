"""The gateway's own OpenAPI document (`GET /openapi.json` without `X-Namespace`): FastAPI's, with what it
cannot see added. The bearer scheme (the token check is middleware, so FastAPI does not know it) for
every operation but `/health`, which Swagger UI's Authorize button uses; the call endpoints' bodies (they
read them themselves) and answers; `/reload`'s header; and what the other endpoints answer, typed, with
ToolDock's error shape. Each namespace's typed document is openapi.py's.
"""

from __future__ import annotations

import copy
from typing import Any

from tooldock.runtime.http.openapi import ERROR_SCHEMA, error_responses


def gateway_openapi(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    components = doc.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {"type": "http", "scheme": "bearer"}
    components.setdefault("schemas", {}).update({"Error": ERROR_SCHEMA, **SCHEMAS})
    doc["security"] = [{"bearer": []}]
    paths = doc.get("paths") or {}
    for path in CALL_PATHS:  # what a call answers, as a namespace's document says it per tool
        operation = paths.get(path, {}).get("post")
        if operation is not None:
            operation["responses"] = {"200": CALL_RESULT, **error_responses()}
    for (path, method), (schema, description, errors) in ANSWERS.items():
        operation = paths.get(path, {}).get(method)
        if operation is not None:
            content = {"application/json": {"schema": _ref(schema)}}
            operation["responses"] = {"200": {"description": description, "content": content}}
            operation["responses"].update(error_responses(errors))
    for operation in paths.get("/health", {}).values():
        operation["security"] = []
    return doc


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_TEXT, _MAYBE_TEXT = {"type": "string"}, {"type": ["string", "null"]}
_NAMES = {"type": "array", "items": {"type": "string"}}
SCHEMAS: dict[str, Any] = {
    "Health": {
        "type": "object",
        "required": ["status", "namespaces", "unhealthy", "generation"],
        "properties": {
            "status": {"enum": ["ok", "degraded"]},
            "namespaces": {"type": "integer", "description": "How many namespaces are served"},
            "unhealthy": {
                "type": "object",
                "additionalProperties": _TEXT,
                "description": "Each namespace not ready, empty or sleeping, with its state",
            },
            "generation": {"type": "integer", "description": "Counts reloads"},
            "replica": {**_TEXT, "description": "The gateway that answered: host:pid"},
            "state": {"enum": ["memory", "redis"], "description": "Where its shared state is (TOOLDOCK_STATE_URL)"},
        },
    },
    "Problem": {
        "type": "object",
        "required": ["file", "message"],
        "properties": {
            "file": {**_TEXT, "description": "The file, relative to the tools directory"},
            "line": {"type": ["integer", "null"]},
            "code": _TEXT,
            "message": _TEXT,
        },
    },
    "NamespaceStatus": {
        "type": "object",
        "required": ["name", "state", "tool_count", "tools", "problems"],
        "description": "Also the worker's fields (`pid`, `restarts`, `last_error`, `inflight`; an upstream "
        "namespace's `catalog` and `servers`) and the secrets' (`secrets_missing`, `secrets_placeholders`)",
        "properties": {
            "name": _TEXT,
            "description": _MAYBE_TEXT,
            "version": _MAYBE_TEXT,
            "state": {**_TEXT, "description": "ready, starting, sleeping, empty, degraded, crash_loop, failed, ..."},
            "tool_count": {"type": "integer"},
            "tools": _NAMES,
            "has_requirements": {"type": "boolean"},
            "problems": {"type": "array", "items": _ref("Problem")},
            "secrets_status": {"enum": ["ok", "missing", "placeholders", "no_secrets_needed"]},
            "reload_error": {**_TEXT, "description": "A newer version failed to start; this one still serves"},
        },
        "additionalProperties": True,
    },
    "Namespaces": {
        "type": "object",
        "required": ["namespaces", "problems"],
        "properties": {
            "namespaces": {"type": "array", "items": _ref("NamespaceStatus")},
            "problems": {"type": "array", "items": _ref("Problem"), "description": "Files skipped by the scan"},
            "replica": {
                "type": "object",
                "description": "The gateway that answered (host:pid) and its reload generation: replicas "
                "sharing a state store reload together and converge on the same namespaces",
                "properties": {"name": _TEXT, "generation": {"type": "integer"}},
            },
        },
    },
    "Tool": {
        "type": "object",
        "required": ["name", "inputSchema"],
        "description": "An MCP tool descriptor, as `tools/list` gives it",
        "properties": {
            "name": _TEXT,
            "title": _MAYBE_TEXT,
            "description": _MAYBE_TEXT,
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": ["object", "null"]},
            "annotations": {"type": ["object", "null"]},
            "icons": {"type": ["array", "null"], "items": {"type": "object"}},
            "_meta": {"type": ["object", "null"]},
        },
        "additionalProperties": True,
    },
    "ToolList": {
        "type": "object",
        "required": ["namespace", "tools"],
        "properties": {"namespace": _TEXT, "tools": {"type": "array", "items": _ref("Tool")}},
    },
    "Reloaded": {
        "type": "object",
        "required": ["reloaded", "namespaces", "generation"],
        "properties": {
            "reloaded": {"type": "boolean"},
            "namespaces": _NAMES,
            "workers_restarted": _NAMES,
            "deps_synced": _NAMES,
            "removed": _NAMES,
            "failed": {"type": "object", "additionalProperties": _TEXT, "description": "Namespace: why"},
            "problems": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": _TEXT},
                "description": "Namespace: what is wrong in a namespace this reload started (it serves the rest)",
            },
            "generation": {"type": "integer"},
            "not_retried": {
                **_NAMES,
                "description": "With retry_failed=false: namespaces that failed before and are unchanged, left so",
            },
        },
    },
}
_LISTED = ("400", "401", "403", "404", "503")
# (path, method) -> (the answer's schema, its description, the error statuses it can give)
ANSWERS: dict[tuple[str, str], tuple[str, str, tuple[str, ...]]] = {
    ("/health", "get"): ("Health", "The gateway's health and each unhealthy namespace's state", ()),
    ("/namespaces", "get"): ("Namespaces", "Every namespace the caller may see, with its state", ("401",)),
    ("/reload", "post"): ("Reloaded", "What the rescan changed", ("401", "403", "500")),
}
for _prefix in ("", "/ns/{namespace}"):
    for _path in ("/tools", "/tools/list"):
        ANSWERS[(f"{_prefix}{_path}", "get")] = ("ToolList", "The namespace's tools the caller may use", _LISTED)
    ANSWERS[(f"{_prefix}/tools/{{name}}/schema", "get")] = ("Tool", "The tool's full descriptor", _LISTED)


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
