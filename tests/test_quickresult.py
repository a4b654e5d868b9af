"""A plain return value's result body made directly (worker/quickresult.py) is the one fastmcp's
`convert_result` gives, to the byte, for every case it takes; it takes the common ones; and only the worker's
own call of the tool gets a body, every other caller a `ToolResult`."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal

import pytest
from fastmcp.tools import FunctionTool, ToolResult
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from tooldock.worker import protocol, quickresult
from tooldock.worker.server import result_body

quickresult.install()


class Color(enum.Enum):
    RED = "red"


class Name(str):
    pass


class Point(BaseModel):
    x: int


class Movie(TypedDict):
    title: str
    year: int


def _tool(annotation: Any, **options: Any) -> FunctionTool:
    def fn(x: int = 0):  # type: ignore[no-untyped-def]
        return x

    if annotation is not inspect_empty:
        fn.__annotations__["return"] = annotation
    return FunctionTool.from_function(fn, **options)


inspect_empty = object()
ANNOTATIONS = [
    int,
    float,
    str,
    bool,
    None,
    Any,
    inspect_empty,
    int | None,
    int | str,
    float | None,
    list[int],
    dict[str, int],
    Literal["a", "b"],
    Color,
    Annotated[int, Field(ge=0)],
    Point,
    datetime.datetime,
    str | None,
    dict,
    dict[str, Any],
    list,
    list[Any],
    dict[str, list[int]],
    Mapping[str, float],
    Sequence[str],
    Movie,
]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=12,
)
EDGES = [
    0,
    -1,
    2**70,
    -(2**64),
    True,
    False,
    1.5,
    -0.0,
    1e20,
    1e-300,
    float("nan"),
    float("inf"),
    "",
    "a",
    "ü\u2028\x00",
    "null",
    "1",
    None,
    [],
    {},
    [1, "a", None],
    {"result": 1},
    {"a": [1, {"b": 1.5}], "ü": None},
    [[]],
    {"a": float("nan")},
    (1, 2),
    {1: "a"},
    {"title": "x", "year": 1999},
    [Point(x=1)],
]


def _expected(tool: FunctionTool, raw: Any) -> bytes | None:
    """fastmcp's own result body for `raw`, as the worker sends it (None when fastmcp refuses it)."""
    with _quiet():
        try:
            return protocol.dump(result_body(quickresult._original(tool, raw)))
        except Exception:
            return None


def _check(tool: FunctionTool, raw: Any) -> bool:
    """Whether the quick body was taken; when it was, it must be fastmcp's byte for byte (compared as bytes:
    in Python 1 == 1.0 == True)."""
    with _quiet():
        made = quickresult.body(tool, raw)
        if made is None:
            return False
        assert protocol.dump(made) == _expected(tool, raw), (tool.return_type, raw)
    return True


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """pydantic warns when a value does not fit its annotation (both ways warn alike)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


TOOLS = [_tool(a) for a in ANNOTATIONS] + [_tool(int, output_schema=None), _tool(str, output_schema=None)]


@pytest.mark.parametrize("raw", EDGES, ids=repr)
def test_every_body_taken_is_fastmcps(raw: Any) -> None:
    for tool in TOOLS:
        _check(tool, raw)


@settings(max_examples=200, deadline=None)
@given(VALUES, st.sampled_from(TOOLS))
def test_every_body_taken_is_fastmcps_for_any_json(raw: Any, tool: FunctionTool) -> None:
    _check(tool, raw)


@pytest.mark.parametrize(
    ("annotation", "raw"),
    [
        (int, 5),
        (int, 2**70),
        (str, "text"),
        (str, ""),
        (float, 1.5),
        (float, 3),
        (bool, True),
        (None, None),
        (Any, "x"),
        (inspect_empty, 7),
        (int | None, None),
        (Annotated[int, Field(ge=0)], 4),
        (dict, {"a": 1}),
        (dict[str, Any], {"a": [1, 2.5, None], "b": {"c": "d"}}),
        (list[int], [1, 2]),
        (list[int], []),
        (inspect_empty, {"a": 1}),
        (inspect_empty, [1]),
        (Movie, {"title": "x", "year": 1999}),
    ],
)
def test_common_values_are_taken(annotation: Any, raw: Any) -> None:
    assert _check(_tool(annotation), raw)


@pytest.mark.parametrize(
    ("tool", "raw"),
    [
        (_tool(float), float("nan")),  # null in structured content, "NaN" would not be fastmcp's text
        (_tool(Color), "red"),  # a value for an Enum annotation: pydantic warns, and both give the value
        (_tool(dict[str, int]), 1),  # an object output schema refuses a scalar: fastmcp's error
        (_tool(int), Color.RED),  # not exactly a scalar type
        (_tool(str), Name("n")),  # a str subclass
        (_tool(datetime.datetime), datetime.datetime(2026, 1, 1)),
        (_tool(dict), {"a": float("inf")}),
        (_tool(dict), {1: "a"}),  # keys JSON has no type for
        (_tool(list), (1, 2)),
        (_tool(Point), Point(x=1)),
        (_tool(list), [Point(x=1)]),
        (_tool(dict), {"a": Color.RED}),
        (_tool(Any), _deep(100)),
    ],
)
def test_what_is_not_certain_goes_to_fastmcp(tool: FunctionTool, raw: Any) -> None:
    with _quiet():
        made = quickresult.body(tool, raw)
    assert made is None or protocol.dump(made) == _expected(tool, raw)
    if not quickresult.plain(raw):
        assert made is None


def test_only_the_workers_own_call_gets_a_body() -> None:
    plain = _tool(int)

    async def nested(x: int = 0) -> int:
        inner = await plain.run({"x": x})  # a tool running another tool itself: a ToolResult, as always
        assert isinstance(inner, ToolResult)
        in_task = await asyncio.create_task(quickresult.run(plain, {"x": x}))
        assert isinstance(in_task, dict)  # a call of its own, in a task of its own
        return x + 1

    outer = FunctionTool.from_function(nested)

    async def main() -> None:
        assert await quickresult.run(plain, {"x": 3}) == {
            "content": [{"type": "text", "text": "3"}],
            "structuredContent": {"result": 3},
            "isError": False,
        }
        assert isinstance(await plain.run({"x": 3}), ToolResult)  # outside quickresult.run: fastmcp's
        assert (await quickresult.run(outer, {"x": 1}))["structuredContent"] == {"result": 2}
        point = FunctionTool.from_function(lambda: Point(x=1), name="point")
        assert isinstance(await quickresult.run(point, {}), ToolResult)  # not a plain value

    asyncio.run(main())
