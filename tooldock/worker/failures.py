"""How a tool's failure reaches the gateway: the protocol error code and message for what it raised, and its
traceback from the tool's own frames on (the worker server's replies and the manager's test_tool show them)."""

from __future__ import annotations

import os
import reprlib
import traceback
from pathlib import Path
from typing import Any

import pydantic
from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as FastMCPValidationError
from mcp.shared.exceptions import MCPError

from tooldock.worker import protocol

MAX_TRACEBACK = 8000  # characters of a failed call's traceback kept (the end, where the tool's own frames are)


def argument_errors(exc: BaseException) -> str:
    """Arguments that do not fit a tool's parameters, one `argument 'where': what (got value)` each.
    pydantic's own text puts a documentation link under every error and its internal names beside it
    (`call[forecast]`, `[type=string_type, input_value=3, input_type=int]`): noise for the person or LLM who
    has to fix the call. fastmcp raises its ValidationError from pydantic's, whose errors say what was wrong."""
    cause = exc if isinstance(exc, pydantic.ValidationError) else exc.__cause__
    if not isinstance(cause, pydantic.ValidationError):
        return str(exc)
    found = []
    for error in cause.errors(include_url=False, include_context=False):
        where = f"argument {'.'.join(str(part) for part in error['loc'])!r}" if error["loc"] else "the arguments"
        given = "" if error["type"] in ("missing", "missing_argument") else f" (got {reprlib.repr(error['input'])})"
        found.append(f"{where}: {error['msg']}{given}")
    return "; ".join(found)


def error_for(exc: BaseException) -> tuple[str, str, dict[str, Any] | None]:
    if isinstance(exc, SystemExit):
        return "internal_error", protocol.exit_message(exc), {"exception": "SystemExit"}
    if isinstance(exc, (FastMCPValidationError, pydantic.ValidationError)):
        return "invalid_arguments", argument_errors(exc), None
    if isinstance(exc, ImportError):
        return "dependency_error", f"{type(exc).__name__}: {exc}", {"exception": type(exc).__name__}
    if isinstance(exc, TimeoutError):
        return "execution_timeout", f"the tool timed out: {exc}", None
    if isinstance(exc, MCPError):  # the tool chose a JSON-RPC error: a task fails with it (runtime/mcp/tasks.py)
        data = {"exception": "MCPError", "rpc_code": exc.error.code, "rpc_message": exc.error.message}
        if exc.error.data is not None:
            data["rpc_data"] = exc.error.data
        return "internal_error", exc.error.message, data
    if isinstance(exc, ToolError):
        return "internal_error", str(exc), {"exception": type(exc).__name__}
    return "internal_error", f"{type(exc).__name__}: {exc}", {"exception": type(exc).__name__}


def own_timeout(exc: BaseException, tool: Any) -> BaseException:
    """fastmcp's answer to a tool that outran its own `@tool(timeout=...)` (an MCPError, -32000) as the
    TimeoutError it is, so the caller gets `execution_timeout` (504 over REST), as for the gateway's own
    limit; any other exception as it is. A tool's own MCPError with other words stays the tool's."""
    timeout = getattr(tool, "timeout", None)
    if isinstance(exc, MCPError) and timeout is not None:
        if exc.error.code == -32000 and exc.error.message == f"Tool '{tool.name}' execution timed out after {timeout}s":
            return TimeoutError(f"it ran longer than its own limit, @tool(timeout={timeout:g})")
    return exc


def tool_traceback(exc: BaseException, folder: Path | None) -> str:
    """A failed call's traceback from the tool's own first frame on. The frames above it (the worker, fastmcp,
    pydantic, the thread hop: about ten) say nothing to the tool's author, or to an LLM fixing the tool
    through the manager's test_tool; the frames below it (libraries the tool called) are kept."""
    shown = traceback.TracebackException.from_exception(exc)
    if folder is not None:
        inside = f"{folder}{os.sep}"
        first = next((i for i, frame in enumerate(shown.stack) if frame.filename.startswith(inside)), None)
        if first:
            shown.stack = traceback.StackSummary.from_list(shown.stack[first:])
    return "".join(shown.format())[-MAX_TRACEBACK:]


def cause_of(exc: BaseException) -> BaseException:
    """The tool's own exception inside fastmcp's `ToolError("Error calling tool ...")` around it."""
    return exc.__cause__ if isinstance(exc, ToolError) and exc.__cause__ is not None else exc


def innermost(exc: BaseException) -> Exception:
    """The first real error inside anyio's exception groups (the in-memory session runs in task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, Exception) else RuntimeError(str(exc))
