"""YAML as sops reads it, so a value means the same to ToolDock and to `sops` (which uses go-yaml v3).

PyYAML speaks YAML 1.1: `yes`/`on` are booleans and `2024-01-01` is a date. go-yaml v3 (YAML 1.2 core
schema, as sops decodes into `interface{}`) keeps those as strings, reads `0o17` as an int and
`true/false`, `null/~`, decimal/hex/octal/binary ints and floats as typed. `load` resolves plain scalars
go-yaml's way; `dump` quotes every string that either dialect would read as something else, and writes
multi-line strings (the armored age blocks) as literal blocks as sops does.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

YAMLError = yaml.YAMLError
_INT = re.compile(r"^[-+]?(?:0[bB][01_]+|0[oO][0-7_]+|0[xX][0-9a-fA-F_]+|[0-9][0-9_]*)$")
_FLOAT = re.compile(
    r"^[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"
)
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_DIGITS = list("-+0123456789")


class _Loader(yaml.SafeLoader):
    """SafeLoader with go-yaml v3's implicit types (no YAML 1.1 booleans, timestamps stay strings)."""


_Loader.yaml_implicit_resolvers = {}  # start empty: only the resolvers below
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, _DIGITS)
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, [*_DIGITS, "."])
_Loader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"])


def _go_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    """`strconv.ParseInt(text, 0, 64)` after go-yaml drops underscores; `09` falls through to a float."""
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
    prefix = digits[:2].lower()
    if prefix in ("0x", "0o", "0b"):
        return sign * int(digits[2:], {"0x": 16, "0o": 8, "0b": 2}[prefix])
    if len(digits) > 1 and digits.startswith("0"):
        try:
            return sign * int(digits, 8)
        except ValueError:
            return float(text)
    return sign * int(digits)


_Loader.add_constructor("tag:yaml.org,2002:int", _go_int)


class _Dumper(yaml.SafeDumper):
    """Quotes a string whenever YAML 1.1 or go-yaml v3 would read it as another type."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:int", _INT, _DIGITS)
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, [*_DIGITS, "."])


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def load(text: str) -> Any:
    """Parse one YAML document the way go-yaml v3 (and so sops) reads it."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects


def dump(data: Any) -> bytes:
    """Block-style YAML, keys in their order, multi-line strings as literal blocks."""
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 16)
    return text.encode()
