"""What `tooldock keys create` accepts: key names, scopes, globs and durations. Every refusal is a
`KeysError` that names the input and says what to write instead."""

from __future__ import annotations

import re

from tooldock.errors import KeysError
from tooldock.keys.scope import SCOPES, Scope

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$")
NAMESPACE_GLOB_RE = re.compile(r"^[a-z0-9*?\[\]!-]{1,63}$")
TOOL_GLOB_RE = re.compile(r"^[A-Za-z0-9_*?\[\]!./-]{1,200}$")
ID_RE = re.compile(r"^[0-9a-f]{12}$")
KEY_PREFIX = "tdk_"  # every key: tdk_<id>_<secret>
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION_RE = re.compile(r"(\d+)([smhdw])")
MAX_DURATION = 100 * 365 * 86400


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise KeysError(
            f"{name[:80]!r} is not a valid key name: 1-64 letters, digits, spaces, '.', '_' or '-', "
            "starting with a letter or digit (e.g. 'ci-reader')"
        )
    return name


def check_scope(scope: str) -> Scope:
    for known in SCOPES:
        if scope == known:
            return known
    raise KeysError(f"unknown scope {scope[:40]!r}: use read, write or admin")


_BRACKETS = re.compile(r"\[!?\]?[^\]]*\]")  # one [...] set as fnmatch reads it


def _sets_closed(glob: str) -> bool:
    """Every `[` opens a set that `]` closes (fnmatch would read an open one as a literal `[`, which no
    name holds: a key that matches nothing)."""
    return not any(c in _BRACKETS.sub("", glob) for c in "[]")


def check_namespace_glob(glob: str) -> str:
    if not NAMESPACE_GLOB_RE.fullmatch(glob) or not _sets_closed(glob):
        raise KeysError(
            f"{glob[:80]!r} is not a namespace glob: namespace names are lowercase letters, digits and '-'; "
            "add *, ? or [...] to match several (e.g. 'weather', 'team-*')"
        )
    return glob


def check_tool_glob(glob: str) -> str:
    parts = glob.split("/")
    if not TOOL_GLOB_RE.fullmatch(glob) or len(parts) > 2 or not all(parts) or not _sets_closed(glob):
        raise KeysError(
            f"{glob[:80]!r} is not a tool glob: a tool name with *, ? or [...] (e.g. 'get_*'), or "
            "'<namespace glob>/<tool glob>' for one namespace's tools (e.g. 'weather/forecast')"
        )
    return glob


def check_id(key_id: str) -> str:
    """A key id (12 hex digits; upper case is taken as lower). Given a whole key instead, the error names
    its id and never repeats the key's secret part."""
    if ID_RE.fullmatch(key_id.lower()):
        return key_id.lower()
    if key_id.startswith(KEY_PREFIX):
        found = key_id.removeprefix(KEY_PREFIX).split("_", 1)[0]
        hint = f"its id is {found}: tooldock keys revoke {found}" if ID_RE.fullmatch(found) else "tooldock keys list"
        raise KeysError(f"that is an API key, not a key id ({hint}); never pass a key as an argument")
    raise KeysError(f"{key_id[:40]!r} is not a key id: ids are 12 hex digits (tooldock keys list shows them)")


def parse_duration(text: str) -> float:
    """`30d`, `12h`, `1w2d`, `90m`, `3600s` -> seconds."""
    cleaned = text.strip().lower()
    parts = _DURATION_RE.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        raise KeysError(
            f"{text[:40]!r} is not a duration: a number with a unit, s m h d or w, or several of them "
            "(e.g. 90m, 12h, 30d, 1w2d)"
        )
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0 or seconds > MAX_DURATION:
        raise KeysError(f"--expires {text!r}: give a duration between 1s and 100 years")
    return float(seconds)
