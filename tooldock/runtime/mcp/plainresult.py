"""The common `tools/call` result (text blocks, structured content, `isError`) as the SDK would send it,
built without pydantic.

The lean path (leanrun.py) shapes a result for the caller's protocol version by validating it against that
version's model and dumping it (`serialize_server_result`), as the SDK does. For the shape nearly every
plain tool returns, text blocks of `type` and `text`, a JSON object or nothing as structured content, and
`isError`, that round trip changes nothing but the order of the keys, and costs the gateway a tenth of its
work on a call. `as_sent` builds that same answer directly, and says None for anything else (other block
types, annotations, `_meta`, a number JSON cannot carry, deep nesting), which goes through the SDK's models
as before. tests/test_mcp_plainresult.py holds the two to the same answers for every protocol version.
"""

from __future__ import annotations

import math
from typing import Any

from mcp_types import SERVER_INFO_META_KEY

RESULT_KEYS = frozenset({"content", "structuredContent", "isError"})
MAX_WALK_DEPTH = 32  # deeper structured content goes through the models (which also refuse what is too deep)
_SCALARS = frozenset({str, int, bool, type(None)})  # JSON values that dump as themselves


def as_sent(result: dict[str, Any], stamp: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """`result` as `serialize_server_result` dumps it (or, with a 2026-07-28 `stamp`, as leanmodern.shape
    does), when it has the common shape; None when it has not."""
    if not result.keys() <= RESULT_KEYS:
        return None
    content, is_error = result.get("content"), result.get("isError")
    if type(content) is not list or type(is_error) is not bool:
        return None
    blocks = []
    for block in content:
        if type(block) is not dict or len(block) != 2 or block.get("type") != "text":
            return None
        text = block.get("text")
        if type(text) is not str:
            return None
        blocks.append({"text": text, "type": "text"})
    sent: dict[str, Any] = {"content": blocks, "isError": is_error}
    if stamp is not None:
        sent["resultType"] = "complete"
    if "structuredContent" in result:
        structured = result["structuredContent"]
        if structured is not None:
            if type(structured) is not dict or not _plain_json(structured):
                return None
            sent["structuredContent"] = structured
    if stamp is not None:
        sent["_meta"] = {SERVER_INFO_META_KEY: stamp}
    return sent


def _plain_json(value: Any) -> bool:
    """Whether `value`, decoded from JSON, dumps as itself: no NaN or infinity (the models send null for
    them), nothing JSON does not decode to, and no deeper than MAX_WALK_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth >= MAX_WALK_DEPTH:
                return False
            children = item.values() if kind is dict else item
            stack.extend((child, depth + 1) for child in children if type(child) not in _SCALARS)
        elif kind is not float or not math.isfinite(item):
            return False
    return True
