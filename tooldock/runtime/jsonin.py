"""JSON from clients, held to what JSON (RFC 8259, I-JSON) allows, so bad input is a clear 400, never a 500.

Python's `json` module accepts more than JSON: `NaN`, `Infinity` and `-Infinity`, numbers like `1e999` that
overflow to infinity, and `\\ud800` escapes that make a lone surrogate (a string no UTF-8 encoder will write,
so the worker protocol fails on it later). It also recurses once per nesting level and raises
`RecursionError` on a body of 100,000 `[`. Here each of these is refused with `InvalidJSON` saying what
and where. `problem()` checks a value some other parser produced (the MCP SDK's, which allows NaN and
infinities as numbers) with the same rules.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from tooldock.errors import InvalidJSON

MAX_DEPTH = 100  # arrays and objects inside each other; a tool's arguments never need more
MAX_DIGITS = 4000  # Python refuses to convert longer integers (sys.get_int_max_str_digits(): 4300)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class _NotJson(ValueError):
    pass


def _constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number; send a finite number (or null)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotJson(f"the number {text[:40]} is too large for a 64-bit float; send a finite number")
    return value


def _int(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise _NotJson(f"an integer of {len(text)} digits is too long; send at most {MAX_DIGITS} digits")
    return int(text)


# Built once: `json.loads` with these hooks builds a decoder (and its scanner) on every call.
_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float, parse_int=_int)


def loads(data: bytes, what: str = "request body") -> Any:
    """Parse `data` or raise `InvalidJSON` naming the problem."""
    try:  # what json.loads does with bytes: UTF-8, -16 or -32 as the first bytes say
        value = _DECODER.decode(data.decode(json.detect_encoding(data), "surrogatepass"))
    except RecursionError:
        raise InvalidJSON(f"{what} is nested too deeply: at most {MAX_DEPTH} levels of arrays and objects") from None
    except _NotJson as exc:
        raise InvalidJSON(f"{what} is not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise InvalidJSON(f"{what} is not valid UTF-8; send JSON encoded as UTF-8") from None
    except ValueError as exc:  # JSONDecodeError
        raise InvalidJSON(f"{what} is not valid JSON: {exc}") from None
    # The full walk only when the cheap signs say it may find something.
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH or _SURROGATE_ESCAPE.search(data):
        found = problem(value)
        if found is not None:
            raise InvalidJSON(f"{what} is not valid JSON: {found}")
    return value


def kind(value: Any) -> str:
    """What `value` is, in JSON's words: for messages about a value of the wrong kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else type(value).__name__


def problem(value: Any, root: str = "$") -> str | None:
    """What makes `value` something JSON cannot carry (too deep, a non-finite number, a lone surrogate),
    with where it is (`$.a[2].b`); None when it is fine."""
    stack: list[tuple[Any, str, int]] = [(value, root, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return f"nested too deeply at {_cut(path)}: at most {MAX_DEPTH} levels of arrays and objects"
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and _lone_surrogate(key):
                        return f"the key {_shown(key)} in {_cut(path)} holds a lone surrogate: {_SURROGATE_HINT}"
                    stack.append((child, f"{path}.{key}" if isinstance(key, str) else path, depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{_cut(path)} is {item}, which is not a JSON number; send a finite number (or null)"
        elif isinstance(item, str) and _lone_surrogate(item):
            return f"the string at {_cut(path)} holds a lone surrogate: {_SURROGATE_HINT}"
    return None


_SURROGATE_HINT = "JSON text must be valid Unicode; send the character itself or a valid surrogate pair"


def _lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _shown(key: str) -> str:
    return repr(key[:40].encode("utf-8", "backslashreplace").decode("ascii", "replace"))


def _cut(path: str) -> str:
    return path if len(path) <= 200 else f"{path[:200]}..."
