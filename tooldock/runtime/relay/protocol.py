"""The relay socket's wire format (seed 002): JSON-RPC 2.0, one message per line (UTF-8 JSON, no raw
newlines inside), requests answered in any order and matched by `id`.

    -> {"jsonrpc": "2.0", "id": 1, "method": "oubliette_tools", "params": {"api_key": "tdk_..."}}
    <- {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "weather_forecast", "inputSchema": ...}]}}

Tool names are qualified by namespace: `<namespace>_<tool>`. Namespace names never contain `_`, so the
first `_` splits the name, and the result is a valid MCP tool name (letters, digits, `_`, `-`, `.`).
This module imports nothing from the gateway: the relay client (`tooldock relay`) shares it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

TOOLS, CALL = "oubliette_tools", "oubliette_call_tool"
# ToolDock's addition to seed 002: after `{"api_key"}` is accepted, the connection gets LIST_CHANGED (a
# JSON-RPC notification, no id) whenever the key's namespaces' tools change.
WATCH, LIST_CHANGED = "tooldock_watch_tools", "notifications/tools/list_changed"
# Also ToolDock's: a call whose params' `_meta` asks for them gets its Context tool's progress and log messages
# as notifications before its answer (MCP's methods; a log message names its call in `_meta`, REQUEST_OF).
PROGRESS, MESSAGE = "notifications/progress", "notifications/message"
LOG_LEVEL, REQUEST_OF = "tooldock/logLevel", "tooldock/requestId"
# And the questions (sampling, elicitation, roots) a call's caller answers, declared in its `_meta`.
CAN_ANSWER = "tooldock/capabilities"
SEPARATOR = "_"
Send = Callable[[bytes], Awaitable[None]]  # writes one encoded message to a connection

# JSON-RPC 2.0's codes, and seed 002's server codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
SERVER_ERROR, INVALID_KEY, NOT_ALLOWED = -32000, -32001, -32002
INVALID_KEY_MESSAGE = "invalid or expired API key"
NOT_ALLOWED_MESSAGE = "tool not allowed for this token scope"


class RpcError(Exception):
    """An error answer: the JSON-RPC code, the message, and `data` (a dict) saying more."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def qualify(namespace: str, tool: str) -> str:
    return f"{namespace}{SEPARATOR}{tool}"


def split(name: str) -> tuple[str, str] | None:
    """`weather_get_forecast` -> (`weather`, `get_forecast`); None if there is no namespace part."""
    namespace, sep, tool = name.partition(SEPARATOR)
    return (namespace, tool) if sep and namespace and tool else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode(line: bytes) -> Any:
    """One line as JSON (NaN and Infinity refused: JSON has neither); RpcError PARSE_ERROR otherwise."""
    try:
        return json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RpcError(PARSE_ERROR, f"parse error: the line is not UTF-8 JSON ({str(exc)[:200]})") from None


def request_id(message: Any) -> Any:
    """The id to answer with: the request's, when it is a valid one; else null."""
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def parse_request(message: Any) -> tuple[str, dict[str, Any]]:
    """(method, params) of a JSON-RPC request object; RpcError INVALID_REQUEST / INVALID_PARAMS otherwise."""
    if isinstance(message, list):
        raise RpcError(INVALID_REQUEST, "batches are not supported: send one JSON-RPC request per line")
    if not isinstance(message, dict):
        raise RpcError(INVALID_REQUEST, "invalid request: a JSON-RPC 2.0 request is a JSON object")
    if message.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"')
    if "id" in message and request_id(message) is None and message["id"] is not None:
        raise RpcError(INVALID_REQUEST, 'invalid request: "id" must be a string or an integer')
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, f'invalid request: "method" must be a string ({TOOLS} or {CALL})')
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, 'invalid params: "params" must be a JSON object (by name)')
    return method, params


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    return encode({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})


def result(rid: Any, value: Any) -> bytes:
    return encode({"jsonrpc": "2.0", "id": rid, "result": value})


def error(rid: Any, err: RpcError) -> bytes:
    body: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.data:
        body["data"] = err.data
    return encode({"jsonrpc": "2.0", "id": rid, "error": body})
