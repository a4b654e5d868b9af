"""The lean path's shortcut for the common `tools/call` result (runtime/mcp/plainresult.py) answers exactly
what the SDK's models would: the same dict, keys in the same order, for every protocol version; and it
steps aside (None) for everything it does not build."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from tooldock.runtime.mcp.leanmodern import shape
from tooldock.runtime.mcp.plainresult import MAX_WALK_DEPTH, as_sent

STAMP = {"name": "tooldock", "version": "1"}
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8)
)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)
BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=8)),
    st.just({"type": "text", "text": "x", "annotations": {"audience": ["user"]}}),
    st.just({"type": "image", "data": "aGk=", "mimeType": "image/png"}),
    st.just({"text": "no type"}),
)


@st.composite
def results(draw: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"content": draw(st.lists(BLOCK, max_size=3))}
    if draw(st.booleans()):
        result["structuredContent"] = draw(st.one_of(st.dictionaries(st.text(max_size=4), JSON, max_size=4), st.none()))
    if draw(st.integers(0, 9)):
        result["isError"] = draw(st.booleans())
    if not draw(st.integers(0, 9)):
        result["_meta"] = {"ui": {"resourceUri": "ui://x"}}
    return result


def ordered(value: Any) -> Any:
    """`value` with every dict's key order made visible, so equal means same keys in the same order too."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


@settings(max_examples=400, deadline=None)
@given(results())
def test_the_shortcut_answers_what_the_models_answer_for_every_version(result: dict[str, Any]) -> None:
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        sent = as_sent(result)
        if sent is not None:
            assert ordered(sent) == ordered(serialize_server_result("tools/call", version, result)), version
    for version in MODERN_PROTOCOL_VERSIONS:
        sent = as_sent(result, STAMP)
        if sent is not None:
            assert ordered(sent) == ordered(shape("tools/call", version, result, STAMP)), version


def test_a_plain_tools_results_take_the_shortcut() -> None:
    """What the worker sends for `-> int`, `-> dict`, `-> str` and a failed call all take it (else the
    shortcut would never run and the property above would pass on nothing)."""
    number = {"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5}, "isError": False}
    record = {"content": [{"type": "text", "text": '{"a":[1,2.5,null]}'}],
              "structuredContent": {"a": [1, 2.5, None]}, "isError": False}
    text = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    failed = {"content": [{"type": "text", "text": "execution_timeout: slow"}], "structuredContent": {
        "error": {"code": "execution_timeout", "message": "slow"}}, "isError": True}
    for result in (number, record, text, failed):
        assert as_sent(result) == serialize_server_result("tools/call", "2025-11-25", result)
        assert as_sent(result, STAMP) == shape("tools/call", "2026-07-28", result, STAMP)


def test_what_the_models_would_change_goes_through_them() -> None:
    base = {"content": [{"type": "text", "text": "x"}], "isError": False}
    assert as_sent({**base, "structuredContent": {"v": math.nan}}) is None  # the models send null
    assert as_sent({**base, "structuredContent": {"v": [math.inf]}}) is None
    assert as_sent({**base, "_meta": {"a": 1}}) is None
    assert as_sent({**base, "content": [{"type": "text", "text": "x", "annotations": None}]}) is None
    assert as_sent({"content": base["content"]}) is None  # no isError: the model leaves it out
    assert as_sent({**base, "structuredContent": [1]}) is None  # not an object: the models refuse it
    deep: Any = 1
    for _ in range(MAX_WALK_DEPTH + 1):
        deep = [deep]
    assert as_sent({**base, "structuredContent": {"d": deep}}) is None
    # what the shortcut builds is JSON: it encodes strictly
    json.dumps(as_sent({**base, "structuredContent": {"v": 1.5}}), allow_nan=False)
