"""How the lean path (lean.py) runs a request through the engine: `tools/list`, `ping`, or `tools/call` (a
Context tool's with a guard's rounds, its questions asked over the stream), with ToolDock's errors turned
into the JSON-RPC errors and tool results the SDK's handlers (server.py) give, and the result shaped for the
caller's protocol version as the SDK shapes it."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.methods import serialize_server_result
from pydantic import ValidationError

from tooldock.errors import NotInScope, StateUnavailable, ToolDockError, ToolNotFound, UpstreamError
from tooldock.runtime import jsonin
from tooldock.runtime.engine import Engine
from tooldock.runtime.mcp.inputreq import legacy_rounds
from tooldock.runtime.mcp.leanmodern import shape as modern_shape
from tooldock.runtime.mcp.plainresult import as_sent
from tooldock.runtime.mcp.results import error_object, error_payload, state_error, upstream_error
from tooldock.runtime.observe import call_info
from tooldock.runtime.versions import check_version

log = logging.getLogger("tooldock.mcp")
STREAMED = "tools/call+stream"  # a Context tool's call: answered as an SSE stream


def method_of(plan: str) -> str:
    """The MCP method a lean plan serves (a streamed call is a `tools/call`)."""
    return "tools/call" if plan == STREAMED else plan


async def run(
    engine: Engine,
    namespace: str,
    plan: str,
    params: dict[str, Any],
    key: Any,
    caller: dict[str, Any],
    relay: Any,
    stamp: dict[str, Any] | None = None,
    session: Any = None,
) -> Any:
    """A lean request run through the engine: `{"result": ...}` shaped for the caller's protocol version,
    or `{"error": ...}` as the SDK words it. `stamp`: the server's `serverInfo`, for a 2026-07-28 result;
    `session`: whose view of an upstream namespace the request sees."""
    method = method_of(plan)
    if method == "ping":
        return {"result": {}}
    with call_info(**caller):
        try:
            if method == "tools/list":
                result: dict[str, Any] = {"tools": engine.list_tools(namespace, session, key)}
            else:
                arguments = params.get("arguments") or {}
                found = jsonin.problem(arguments, "arguments")
                if found is not None:  # NaN and infinities are not JSON numbers
                    return {"error": {"code": types.INVALID_PARAMS, "message": f"invalid arguments: {found}"}}
                check_version(engine, namespace, params["name"], params.get("_meta"), session, key)
                called = await _call(engine, namespace, params["name"], arguments, relay, key, session)
                result = {k: v for k, v in called.items() if v is not None}
        except (ToolNotFound, NotInScope) as err:
            return {"error": {"code": types.INVALID_PARAMS, "message": err.message}}
        except UpstreamError as err:  # an upstream server's JSON-RPC error, relayed as it sent it
            return {"error": error_object(upstream_error(err))}
        except MCPError as err:  # a guard's question the client did not declare, or refused
            return {"error": error_object(err)}
        except StateUnavailable as err:
            return {"error": error_object(state_error(err))}
        except ToolDockError as err:
            if method == "tools/list":
                return {"error": {"code": types.INVALID_REQUEST, "message": err.message}}
            result = error_payload(err)
    if method == "tools/call" and (sent := as_sent(result, stamp)) is not None:
        return {"result": sent}  # the common shape, as the models below would dump it
    try:  # the result shaped for the session's protocol version, as the SDK sends it
        if stamp is not None:
            return {"result": modern_shape(method, caller["protocol"], result, stamp)}
        return {"result": serialize_server_result(method, caller["protocol"], result)}
    except ValidationError:
        log.exception("the %s result of namespace %r is not valid MCP", method, namespace)
        return {"error": {"code": types.INTERNAL_ERROR, "message": "Handler returned an invalid result"}}


async def _call(
    engine: Engine, namespace: str, tool: str, arguments: dict[str, Any], relay: Any, key: Any, session: Any
) -> Any:
    """A plain tool's call; a Context tool's with a guard's rounds, its questions asked over the stream."""
    if relay is None:
        return await engine.call_tool(namespace, tool, arguments, None, session=session, key=key)
    return await legacy_rounds(
        lambda: engine.call_tool(namespace, tool, arguments, relay, session=session, key=key), relay.ask_declared
    )
