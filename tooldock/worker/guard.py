"""Guard-pattern tools, prompts and resources (MCP 2026-07-28, SEP-2322) inside the worker.

A fastmcp "guard" returns an `InputRequiredResult` from its body to ask the client for input, and reads
`ctx.input_responses` / `ctx.request_state` on the next round. The worker's server is called as
2025-11-25 (direct.py, so that imperative `ctx.elicit()` keeps working: the gateway relays or records it), where
fastmcp refuses to put an `InputRequiredResult` on the wire. `GuardServer` hands it over instead as an
ordinary, empty result whose `_meta` carries it under `INPUT_REQUIRED`; the gateway's
`runtime/mcp/inputreq.py` turns that back into an `input_required` result (or, for a 2025-11-25 client,
asks the client itself and runs the next round).

The worker's server has no request-state boundary of its own: the gateway seals and verifies
`requestState` at its edge, and the worker only ever sees the plaintext the tool minted.

It also finds a tool by its name directly. fastmcp's `get_tool` asks its providers, then the session's
visibility rules (kept in a key-value store) and the auth checks: an eighth of a Context tool call's CPU
in the worker, run twice a call. Here every tool is the namespace's own, without auth or versions, and a
tool a session's visibility rules hide never gets here (the gateway refuses its call: visibility.py); a
tool with an auth check, a version or a visibility mark still goes through fastmcp.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.prompts.base import InputRequiredPromptResult, PromptResult
from fastmcp.resources.base import InputRequiredResourceResult, ResourceResult
from fastmcp.server.transforms.visibility import is_enabled
from fastmcp.tools.base import InputRequiredToolResult, Tool, ToolResult
from key_value.aio.stores.memory import MemoryStore
from mcp.server.request_state import RequestStateBoundary

from tooldock.worker.protocol import INPUT_REQUIRED, exit_message
from tooldock.worker.sessionvalues import SessionValues
from tooldock.worker.visibility import SessionRules

# Set by the caller of a Context tool to a list that `GuardServer.call_tool` appends to when the call
# fails: fastmcp answers every failure with an `isError` result, and the worker still tells the gateway what
# a plain tool's failure tells it. A `ValidationError` (the arguments failed the tool's validation) is
# `invalid_arguments`, REST's 422; any other exception gives the traceback the manager's test_tool shows.
CALL_FAILURES: ContextVar[list[BaseException] | None] = ContextVar("tooldock_call_failures", default=None)


def _carried(result: Any) -> dict[str, Any]:
    body = result.input_required.model_dump(mode="json", by_alias=True, exclude_none=True)
    body.pop("resultType", None)
    return {INPUT_REQUIRED: body}


class GuardServer(FastMCP[Any]):
    def __init__(self, name: str) -> None:
        # A session's visibility rules and its values are the gateway's (visibility.py, sessionvalues.py)
        self.rules = SessionRules(SessionValues(MemoryStore()))
        super().__init__(name, session_state_store=self.rules)
        lowlevel = self._mcp_server
        lowlevel.middleware[:] = [m for m in lowlevel.middleware if not isinstance(m, RequestStateBoundary)]
        self._direct: dict[str, Tool | None] = {}  # None: a name fastmcp must resolve

    def add_tool(self, tool: Any) -> Tool:
        added = super().add_tool(tool)
        plain = added.auth is None and added.version is None and (added.meta is None or is_enabled(added))
        self._direct[added.name] = added if plain and added.name not in self._direct else None
        return added

    async def get_tool(self, name: str, version: Any = None) -> Tool | None:
        found = self._direct.get(name) if version is None else None
        return found if found is not None else await super().get_tool(name, version)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> ToolResult:
        try:
            result = await super().call_tool(name, arguments, **kwargs)
        except SystemExit as exc:  # the call fails, not the worker (protocol.exit_message)
            raise ToolError(exit_message(exc)) from None
        except Exception as exc:
            failures = CALL_FAILURES.get()
            if failures is not None:
                failures.append(exc)
            raise
        if isinstance(result, InputRequiredToolResult):
            # Flagged as an error only so that a client would skip output-schema validation; the bridge
            # clears the flag.
            return ToolResult(content=[], meta=_carried(result), is_error=True)
        return result

    async def render_prompt(self, name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> PromptResult:
        result = await super().render_prompt(name, arguments, **kwargs)
        if isinstance(result, InputRequiredPromptResult):
            return PromptResult(messages=[], meta=_carried(result))
        return result

    async def read_resource(self, uri: str, **kwargs: Any) -> ResourceResult:
        result = await super().read_resource(uri, **kwargs)
        if isinstance(result, InputRequiredResourceResult):
            return ResourceResult(contents=[], meta=_carried(result))
        return result
