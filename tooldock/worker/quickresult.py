"""A tool's return value, when it is plain JSON (a str, int, float, bool or None, or lists and str-keyed dicts
of them), becomes its call's result body here rather than through fastmcp's `Tool.convert_result`.

For such a value the pinned fastmcp converts it to content blocks three times (isinstance checks against the
content union, prefab checks each time) and serializes it twice, validating a `ToolResult` and a
`TextContent` on the way; the worker then dumps those models again. That was a third of a worker's main-thread
CPU for a trivial tool (a py-spy profile at 1 concurrent); answering from the value directly made a call
through the gateway 5% faster at 1 concurrent and 9% at 16 (alternating rounds, median).

The body is fastmcp's to the byte: the structured value comes from fastmcp's own serializer with the tool's
return annotation, the text from fastmcp's own `default_serializer`, and the rules are `convert_result`'s
(no content block for None or an empty list; structured content wrapped in `{"result": ...}` when the output
schema says so, an object's own when there is no schema, nothing else). Only the cases whose outcome is
certain are taken:
- the value, and what the serializer makes of it, are plain JSON by exact type (an Enum, a str subclass, a
  tuple, a model and everything else go to fastmcp), floats finite (fastmcp's `ToolResult` turns NaN and
  infinity in structured content into null), at most MAX_DEPTH deep;
- an output schema without the wrap takes an object only (fastmcp refuses anything else, in its words).
Anything else, or a serializer that fails, goes to fastmcp's `convert_result`, which decides as before.
`tests/test_quickresult.py` checks that both give the same body for every case taken.

How it reaches the value: `Tool.convert_result` is the last step of `FunctionTool.run`, whose return value
goes out unchanged. `install()` wraps it; the wrapper answers with the body only inside `run` below, for that
tool and that task (so a tool that runs other tools itself, or a server running in the same process, still
gets `ToolResult`s), and only for a `FunctionTool` exactly (a subclass may post-process the result).
"""

from __future__ import annotations

import asyncio
import math
from contextvars import ContextVar
from typing import Any

from fastmcp.tools.base import Tool, _serialize_to_jsonable, default_serializer
from fastmcp.tools.function_tool import FunctionTool

MAX_DEPTH = 64
WRAP = "x-fastmcp-wrap-result"
# (tool, task) of the call whose result `run` takes as a body
_taking: ContextVar[tuple[Any, Any] | None] = ContextVar("tooldock_quick_result", default=None)
_original: Any = None


def body(tool: Any, raw: Any) -> dict[str, Any] | None:
    """The result body (`content`, `structuredContent`, `isError`) fastmcp would give `raw`, or None when this
    module does not take it."""
    if not plain(raw):
        return None
    schema = tool.output_schema
    wrap = schema is not None and bool(schema.get(WRAP))
    try:
        structured = _serialize_to_jsonable(raw, tool.return_type)
        if not plain(structured) or (schema is not None and not wrap and type(structured) is not dict):
            return None  # (fastmcp refuses anything but an object as unwrapped structured content: its error)
        if structured is None or structured == []:  # fastmcp: no content block for these
            content = []
        else:
            text = structured if type(structured) is str else default_serializer(structured)
            content = [{"type": "text", "text": text}]
    except Exception:  # fastmcp says what went wrong (or falls back to text) in its own words
        return None
    if wrap:
        structured = {"result": structured}
    elif type(structured) is not dict:  # no output schema: structured content only for an object
        structured = None
    return {"content": content, "structuredContent": structured, "isError": False}


def plain(value: Any, depth: int = 0) -> bool:
    """Whether `value` is JSON as the json module reads it: exactly str, int, bool, None, a finite float, or
    lists and str-keyed dicts of them (nested at most MAX_DEPTH deep)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        return all(type(key) is str and plain(item, depth + 1) for key, item in value.items())
    if kind is list:
        return all(plain(item, depth + 1) for item in value)
    return False


async def run(tool: Any, arguments: dict[str, Any]) -> Any:
    """`tool.run(arguments)`: a `ToolResult`, or the result body (a dict) when `body` takes the value."""
    if type(tool) is not FunctionTool or _original is None:
        return await tool.run(arguments)
    token = _taking.set((tool, asyncio.current_task()))
    try:
        return await tool.run(arguments)
    finally:
        _taking.reset(token)


def _convert_result(self: Any, raw_value: Any) -> Any:
    taking = _taking.get()
    if taking is not None and taking[0] is self and _current_task() is taking[1]:
        found = body(self, raw_value)
        if found is not None:
            return found
    return _original(self, raw_value)


def _current_task() -> Any:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop in this thread
        return None


def install() -> None:
    """Wrap fastmcp's `Tool.convert_result` for `run` (once per process)."""
    global _original
    if Tool.convert_result is not _convert_result:
        _original = Tool.convert_result
        Tool.convert_result = _convert_result  # type: ignore[method-assign]
