"""The worker protocol's JSON (protocol.dump / parse / encode / decode): pydantic_core's encoder and parser
on the hot path, the json module for what they refuse, so every value reads back as the json module would
have read it and every input the json module refused is still refused."""

from __future__ import annotations

import datetime
import enum
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldock.worker import protocol

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_dump_reads_back_as_the_json_module_wrote_it(value: object) -> None:
    assert json.loads(protocol.dump(value)) == json.loads(json.dumps(value))
    assert protocol.parse(json.dumps(value).encode()) == json.loads(json.dumps(value))


@pytest.mark.parametrize(
    "text",
    [
        b'"\\ud800"',  # a lone surrogate escape: pydantic_core refuses it, json takes it
        b"[" * 300 + b"]" * 300,  # deeper than pydantic_core's limit, within json's
        b'\xef\xbb\xbf{"a": 1}',  # a UTF-8 byte order mark
        b"NaN",
        b"[-Infinity, 1e400]",
        b"123456789012345678901234567890",
        b'{"a": 1, "a": 2}',
    ],
)
def test_parse_takes_what_the_json_module_takes(text: bytes) -> None:
    got, expected = protocol.parse(text), json.loads(text)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected


@pytest.mark.parametrize("text", [b"", b"{", b"[1,]", b"'a'", b"01", b'"a\nb"', b'{"a":1}x', b"\xff", b"nan"])
def test_parse_refuses_what_the_json_module_refuses(text: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        protocol.parse(text)


def test_decode_keeps_its_errors() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        protocol.decode(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ValueError, match="must be a JSON object"):
        protocol.decode(b"[1]\n")
    assert protocol.decode(b'{"op": "ping", "id": "\\ud800"}\n') == {"op": "ping", "id": "\ud800"}


def test_encode_sends_a_lone_surrogate_as_a_replacement_character() -> None:
    line = protocol.encode({"id": "1", "text": "a\ud800b"})
    assert line.endswith(b"\n") and json.loads(line) == {"id": "1", "text": "a\ufffdb"}


def test_a_circular_value_is_still_an_error() -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(ValueError):
        protocol.dump(looped)


class Colour(enum.Enum):
    RED = "red"


def test_values_json_has_no_type_for_are_written_as_pydantic_writes_them_else_as_str() -> None:
    thing = object()
    got = json.loads(protocol.dump({"when": datetime.date(2026, 11, 28), "set": {1}, "colour": Colour.RED,
                                    "other": thing}))
    assert got == {"when": "2026-11-28", "set": [1], "colour": "red", "other": str(thing)}


def test_dump_is_compact_utf8() -> None:
    assert protocol.dump({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
