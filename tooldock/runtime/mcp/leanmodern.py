"""The lean path for MCP 2026-07-28 requests: `tools/call` of a plain tool and `tools/list`, each a POST of
its own with no session, answered as one JSON response without the SDK's per-request machinery (a task
group, a memory stream and a second task per request, a fresh connection and server runner, and, for a
call with arguments, a whole `tools/list` run through the server to look for `Mcp-Param-*` declarations).

It takes a request only when the SDK would serve it and its answer has one obvious form; everything else
goes to the SDK, which then answers it (its validation ladder's rejections included). Taken, a request
- is a POST whose `MCP-Protocol-Version` names a 2026-era version, with no routing header sent twice and no
  `Mcp-Param-*` header, and an Accept for JSON and SSE (the SDK's own DNS-rebinding checks are in lean.py);
- is one JSON-RPC request whose envelope passes the SDK's own ladder (`classify_inbound_request`: the
  `_meta` envelope, `Mcp-Method` and `Mcp-Name` against the body) and its own validation of the params;
- names a plain tool (no fastmcp Context: no progress, logs or input requests) of a worker namespace, that
  declares no `x-mcp-header` parameter and does not run as a task, for a client that did not declare the
  tasks extension; or is a `tools/list` without a cursor.
The answer is the SDK's: the handler's result model, shaped for the version, `resultType` and the
`serverInfo` stamp in `_meta`, errors with the SDK's table of HTTP statuses. A client that goes away
cancels the call, as closing the response stream does on the SDK's path.
"""

from __future__ import annotations

import json
import weakref
from typing import Any

import mcp_types as types
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, InboundModernRoute, classify_inbound_request
from mcp_types import CLIENT_CAPABILITIES_META_KEY, SERVER_INFO_META_KEY
from mcp_types import methods as _methods
from mcp_types.methods import serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Send

from tooldock.runtime.engine import Engine
from tooldock.runtime.mcp.tasks import TASKS, mode_of

MODERN = frozenset(MODERN_PROTOCOL_VERSIONS)
ROUTING = (b"mcp-protocol-version", b"mcp-method", b"mcp-name")
PARAM_PREFIX = b"mcp-param-"
ENVELOPE = frozenset(("jsonrpc", "id", "method", "params"))
CALL_PARAMS = frozenset(("name", "arguments", "_meta"))
HEADER_DECLARATION = '"x-mcp-header"'  # in a tool's input schema: the SDK compares Mcp-Param-* headers


class ModernRoute:
    """A 2026-07-28 request this path serves: its method, id, params and the envelope the SDK's ladder read."""

    __slots__ = ("method", "params", "rid", "verdict")

    def __init__(self, method: str, rid: Any, params: dict[str, Any], verdict: InboundModernRoute) -> None:
        self.method, self.rid, self.params, self.verdict = method, rid, params, verdict

    def caller(self, client: Any) -> dict[str, Any]:
        """Who the request comes from, as the audit log records it (`caller.caller_of` on the SDK's path)."""
        info = self.verdict.client_info
        return {
            "front_end": "mcp",
            "client": client,
            "client_info": {"name": info["name"], "version": info["version"]} if isinstance(info, dict) else None,
            "protocol": self.verdict.protocol_version,
        }


class ModernLean:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # namespace -> (its entry, the tool list and plain tools they were worked out from, tools taken here)
        self._tools: dict[str, tuple[weakref.ref[Any], Any, Any, frozenset[str]]] = {}

    def route(self, namespace: str, msg: Any, routing: dict[str, str]) -> ModernRoute | None:
        """What this path does with `msg` (a decoded body), or None for the SDK. `routing`: the request's
        MCP-Protocol-Version, Mcp-Method and Mcp-Name headers, each sent once, by lowercase name."""
        if not isinstance(msg, dict) or msg.keys() - ENVELOPE or msg.get("jsonrpc") != "2.0":
            return None
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params")
        if method not in ("tools/call", "tools/list") or not isinstance(params, dict):
            return None
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return None
        verdict = classify_inbound_request(msg, headers=routing)
        if not isinstance(verdict, InboundModernRoute):
            return None  # the SDK's rejection, with its words
        try:
            _methods.validate_client_request(method, verdict.protocol_version, params)
        except ValidationError:
            return None
        extensions = (params["_meta"].get(CLIENT_CAPABILITIES_META_KEY) or {}).get("extensions") or {}
        if TASKS in extensions:
            return None  # a client that reads tasks: the tasks extension decides
        entry = self.engine.registry.snapshot.entries.get(namespace)
        if entry is None or entry.source.is_upstream:
            return None
        if method == "tools/list":
            return ModernRoute(method, rid, params, verdict) if not params.keys() - {"_meta"} else None
        if params.keys() - CALL_PARAMS or not isinstance(params.get("arguments", {}), dict):
            return None
        if params.get("name") not in self._taken(namespace, entry):
            return None
        return ModernRoute(method, rid, params, verdict)

    def _taken(self, namespace: str, entry: Any) -> frozenset[str]:
        """The namespace's tools a call of which this path may answer (worked out once per entry)."""
        tools, plain = entry.tools, getattr(entry.worker, "plain_tools", frozenset[str]())
        cached = self._tools.get(namespace)  # a worker's handshake (a restart too) sets new lists
        if cached is not None and cached[0]() is entry and cached[1] is tools and cached[2] is plain:
            return cached[3]
        names = frozenset(
            str(tool["name"])
            for tool in tools
            if tool.get("name") in plain
            and mode_of(tool, entry.source.config) == "forbidden"
            and HEADER_DECLARATION not in json.dumps(tool.get("inputSchema") or {})
        )
        self._tools[namespace] = (weakref.ref(entry), tools, plain, names)  # an old entry is not kept alive
        return names


def shape(method: str, version: str, result: dict[str, Any], stamp: dict[str, Any]) -> dict[str, Any]:
    """A handler's result as the SDK sends it on a 2026-07-28 connection: the handler's model (server.py),
    dumped, shaped for the version, with `resultType` and the server's `serverInfo` stamp in `_meta`."""
    if method == "tools/call":
        model: Any = types.CallToolResult.model_validate(result)
    else:
        model = types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in result["tools"]])
    dumped = serialize_server_result(method, version, model.model_dump(by_alias=True, mode="json", exclude_none=True))
    dumped.setdefault("resultType", "complete")
    meta = dumped.get("_meta")
    if meta is None:
        dumped["_meta"] = {SERVER_INFO_META_KEY: stamp}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        dumped["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp}
    return dumped


async def answer(send: Send, payload: dict[str, Any]) -> None:
    """The JSON-RPC answer with the SDK's HTTP status for its error code (200 for a result)."""
    error = payload.get("error")
    status = ERROR_CODE_HTTP_STATUS.get(error["code"], 200) if isinstance(error, dict) else 200
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
