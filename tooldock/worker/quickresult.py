"""A plain tool's return value, when it is a str, int, float, bool or None, becomes its call's result body here
rather than through fastmcp's `Tool.convert_result`.

For such a value the pinned fastmcp converts it to content blocks three times (isinstance checks against the
content union, prefab checks each time) and serializes it twice, validating a `ToolResult` and a
`TextContent` on the way; the worker then dumps those models again. That was a third of a worker's main-thread
CPU for a trivial tool (a py-spy profile at 1 concurrent); answering from the value directly made a call
through the gateway 5% faster at 1 concurrent and 9% at 16 (alternating rounds, median).

The body is fastmcp's to the byte: the structured value comes from fastmcp's own serializer with the tool's
return annotation, the text from fastmcp's own `default_serializer`. Only the cases whose outcome is certain
are taken:
- the value's type is exactly one of the five (an Enum, a str subclass and everything else go to fastmcp);
- serialized by the return annotation it is still one of them, and a float among them is finite (fastmcp's
  `ToolResult` turns NaN and infinity in structured content into null);
- the tool has no output schema (text only), or one that wraps the value in `{"result": ...}`, which is what
  fastmcp makes for a scalar return annotation.
Anything else, or a serializer that fails, goes to fastmcp's `convert_result`, which decides as before.
`tests/test_quickresult.py` checks that both give the same body for every case taken here.

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

SCALARS = frozenset({str, int, float, bool, type(None)})
WRAP = "x-fastmcp-wrap-result"
# (tool, task) of the call whose result `run` takes as a body
_taking: ContextVar[tuple[Any, Any] | None] = ContextVar("tooldock_quick_result", default=None)
_original: Any = None


def body(tool: Any, raw: Any) -> dict[str, Any] | None:
    """The result body (`content`, `structuredContent`, `isError`) fastmcp would give `raw`, or None when this
    module does not take it."""
    if type(raw) not in SCALARS:
        return None
    schema = tool.output_schema
    wrap = schema is not None and bool(schema.get(WRAP))
    if schema is not None and not wrap:  # fastmcp refuses a scalar as structured content: its error
        return None
    try:
        structured = _serialize_to_jsonable(raw, tool.return_type)
    except Exception:  # fastmcp says what went wrong (or falls back to text) in its own words
        return None
    kind = type(structured)
    if kind not in SCALARS or (kind is float and not math.isfinite(structured)):
        return None
    text = structured if kind is str else default_serializer(structured)
    return {
        "content": [] if structured is None else [{"type": "text", "text": text}],
        "structuredContent": {"result": structured} if wrap else None,
        "isError": False,
    }


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
