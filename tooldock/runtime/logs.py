"""How the gateway (and the manager) log: to stderr, as text or as one JSON object per line.

- `TOOLDOCK_LOG_FORMAT=json`: every line on stderr is a JSON object `{"time", "level", "logger",
  "message"}` plus `request_id` when the line is about a request and `exc` for a traceback. That covers
  uvicorn's and ToolDock's log records and, through `JsonLines`, the lines ToolDock prints (`tooldock: ...`)
  and the output of its workers, which it forwards.
- `TOOLDOCK_ACCESS_LOG=true` turns uvicorn's line per request back on; off by default.
"""

from __future__ import annotations

import copy
import io
import json
import logging
import sys
import time
from typing import Any, TextIO

from tooldock.runtime import requestid

_FIELDS = ("client", "method", "path", "http_version", "status")  # uvicorn's access record, as JSON fields


def _now(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _now(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == len(_FIELDS):
            entry.update(zip(_FIELDS, record.args, strict=True))
        found = getattr(record, "request_id", None) or requestid.current.get()
        if found:
            entry["request_id"] = found
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=True, default=str)


class OncePerWindow(logging.Filter):
    """One record of a kind per `window` seconds; the next one let through says how many were held back.

    For loggers that write a line per refused request (the MCP SDK's `Invalid Origin header: ...`): a
    client retrying in a loop, or many of them, would flood the log. A record's kind is its message up to
    the first ": ", so a client that varies the `Origin` it sends still makes one kind; at most KINDS kinds
    are remembered (beyond that the memory starts again, which lets a line through early, never more)."""

    KINDS = 256

    def __init__(self, window: float = 60.0, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.window, self.clock = window, clock
        self._kinds: dict[str, list[float]] = {}  # kind -> [when one was last let through, held back since]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        kind, now = message.split(": ", 1)[0][:200], self.clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen[0] < self.window:
            seen[1] += 1
            return False
        if seen is None and len(self._kinds) >= self.KINDS:
            self._kinds.clear()
        held = int(seen[1]) if seen is not None else 0
        self._kinds[kind] = [now, 0]
        if held:
            record.msg, record.args = f"{message} (and {held} more like it not logged since the last one)", ()
        return True


# C0 and C1 control characters and DEL, as visible escapes (tab and nothing else is kept).
_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x09}
_ESCAPES.update({0x0A: "\\n", 0x0D: "\\r"})
MAX_LOGGED_VALUE = 500  # characters of one value a client sent (a tool name, a path) in a log line


def one_line(text: str) -> str:
    """`text` with control characters escaped: what a client sent cannot start a line of its own (a forged
    log line) or drive the operator's terminal (escape sequences)."""
    return text.translate(_ESCAPES)


class OneLine(logging.Filter):
    """On the text handlers: every record is one line. The values a message is built from (a tool name, a
    URL path, a key's name) are escaped and cut to MAX_LOGGED_VALUE characters, so a client cannot forge a
    line (`tool: "x\\nINFO:     key 000... admin"`); a traceback (`exc_info`) stays as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_value(a) for a in record.args)
        if isinstance(record.msg, str):
            record.msg = one_line(record.msg)
        return True


def _value(arg: Any) -> Any:
    if not isinstance(arg, str):
        return arg
    cut = arg if len(arg) <= MAX_LOGGED_VALUE else f"{arg[:MAX_LOGGED_VALUE]}...({len(arg) - MAX_LOGGED_VALUE} more)"
    return one_line(cut)


def filter_once(kind: type[logging.Filter], *loggers: str) -> None:
    """Give each named logger a `kind()` filter, unless it has one (however often this is called: every
    app a process builds, as tests do, would add another)."""
    for name in loggers:
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())


class JsonLines(io.TextIOBase):
    """Stands in for `sys.stderr` in JSON mode: each line printed becomes `{"time", "level", "logger",
    "message"}` on the real stderr (`level` is "error" for a traceback's first and `File` lines, else "info")."""

    def __init__(self, target: TextIO) -> None:
        self.target, self._pending = target, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            if line.strip():
                self._emit(line)
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def _emit(self, line: str) -> None:
        level = "error" if line.startswith(("Traceback", '  File "')) else "info"
        entry: dict[str, Any] = {"time": _now(time.time()), "level": level, "logger": "tooldock", "message": line}
        found = requestid.current.get()
        if found:
            entry["request_id"] = found
        self.target.write(json.dumps(entry, ensure_ascii=True) + "\n")
        self.target.flush()


def log_config(level: str, fmt: str = "text", access: bool = False) -> dict[str, Any]:
    """uvicorn's logging configuration, on stderr (stdout is for results), with ToolDock's own loggers."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for handler in config["handlers"].values():
        handler["stream"] = "ext://sys.stderr"
    if fmt == "json":
        for name in config["formatters"]:
            config["formatters"][name] = {"()": "tooldock.runtime.logs.JsonFormatter"}
        for handler in config["handlers"].values():
            handler["stream"] = "ext://sys.__stderr__"  # sys.stderr is a JsonLines: no JSON inside JSON
    else:
        config.setdefault("filters", {})["one_line"] = {"()": "tooldock.runtime.logs.OneLine"}
        for handler in config["handlers"].values():
            handler["filters"] = [*handler.get("filters", []), "one_line"]
    config["loggers"]["uvicorn.access"]["level"] = level.upper() if access else "CRITICAL"
    config["loggers"]["tooldock"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    # The MCP SDK's MCPServer (the manager's tools are one) calls logging.basicConfig with a RichHandler at
    # INFO on the root logger: the SDK's line per MCP session opened and closed came out in rich's wrapped
    # columns, and as one JSON line per column row under TOOLDOCK_LOG_FORMAT=json. Libraries' loggers go
    # through ToolDock's handler instead (this replaces the root's handlers), at WARNING unless debugging.
    config["root"] = {"handlers": ["default"], "level": "DEBUG" if level.lower() in ("debug", "trace") else "WARNING"}
    return config


def use_json_lines() -> None:
    """From here on, what is printed to stderr comes out as JSON lines (`TOOLDOCK_LOG_FORMAT=json`)."""
    if not isinstance(sys.stderr, JsonLines):
        sys.stderr = JsonLines(sys.__stderr__ or sys.stderr)
