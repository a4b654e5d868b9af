"""Who is calling, as the front end that took the request knows it, carried to the engine in a context
variable (it follows the request through every task it starts, and never crosses to another request)."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, replace
from typing import Any

# Every call builds one of these and turns it into its audit line's fields: a slotted dataclass and a
# hand-written `to_dict` (dataclasses.asdict deep-copies every field, a tenth of a REST call's gateway time).
_FIELDS = ("front_end", "request_id", "client", "key_id", "client_info", "protocol")


@dataclass(slots=True)
class CallInfo:
    front_end: str = "rest"  # rest | mcp | sse | relay | manager
    request_id: str | None = None  # the HTTP request's id when the front end has none of its own (relay)
    client: str | None = None  # the peer address
    key_id: str | None = None  # the scoped API key used, never the key
    client_info: dict[str, Any] | None = None  # MCP clientInfo {name, version}
    protocol: str | None = None  # MCP protocol version

    def to_dict(self) -> dict[str, Any]:
        values = (getattr(self, name) for name in _FIELDS)
        return {name: value for name, value in zip(_FIELDS, values, strict=True) if value is not None}


_current: contextvars.ContextVar[CallInfo | None] = contextvars.ContextVar("tooldock_call", default=None)


def current_call() -> CallInfo:
    """The calling request's context (a fresh one when no front end set it, e.g. in a unit test)."""
    return _current.get() or CallInfo()


def call_info(**fields: Any) -> _CallScope:
    """Set (or refine) the call context for the block: fields given override those already set."""
    return _CallScope(fields)


class _CallScope:
    """`call_info`'s block: a plain context manager (a generator-based one costs more, once per call)."""

    __slots__ = ("_fields", "_token")

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields

    def __enter__(self) -> CallInfo:
        base = _current.get()
        info = replace(base, **self._fields) if base is not None else CallInfo(**self._fields)
        self._token = _current.set(info)
        return info

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)
