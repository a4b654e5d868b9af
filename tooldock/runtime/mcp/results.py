"""ToolDock's errors as MCP answers, in one place for the SDK path (server.py) and the lean path (lean.py)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from tooldock.errors import StateUnavailable, ToolDockError, UpstreamError


def error_payload(err: ToolDockError) -> dict[str, Any]:
    """A tool-level failure as MCP sees it: `isError` with the message as text and the error as data."""
    text = {"type": "text", "text": f"{err.code}: {err.message}"}
    return {"content": [text], "structuredContent": {"error": err.to_dict()}, "isError": True}


def error_result(err: ToolDockError) -> types.CallToolResult:
    return types.CallToolResult.model_validate(error_payload(err))


def upstream_error(err: UpstreamError) -> MCPError:
    """An upstream server's JSON-RPC error, relayed as it sent it (seed 001: no wrapping)."""
    code = err.details.get("rpc_code")
    return MCPError(
        code if isinstance(code, int) else types.INTERNAL_ERROR,
        str(err.details.get("rpc_message") or err.message),
        err.details.get("rpc_data"),
    )


def error_object(err: MCPError) -> dict[str, Any]:
    """An MCPError as a JSON-RPC error object (`{"code", "message", "data"?}`)."""
    return err.error.model_dump(mode="json", by_alias=True, exclude_none=True)


def state_error(err: StateUnavailable) -> MCPError:
    """The shared state store did not answer: a JSON-RPC error (the request was not served, whatever it was),
    with ToolDock's code and when to retry as its data."""
    return MCPError(
        types.INTERNAL_ERROR,
        err.message,
        {"code": err.code, "retryAfterSeconds": err.details.get("retry_after_seconds", 1)},
    )
