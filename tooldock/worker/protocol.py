"""The worker protocol, shared by the worker and the gateway: newline-delimited JSON over a unix socket.

On connect the worker sends one handshake line:
    {"op": "ready", "protocol": 2, "namespace": "ns", "pid": 123, "tools": [...], "failed_files": [...]}
Requests carry an id and may be multiplexed on one connection; responses come back in any order:
    {"id": "7", "op": "tools.call", "tool": "add", "arguments": {"a": 1, "b": 2}}
    {"id": "7", "ok": true, "result": {...}, "latency_ms": 3}
    {"id": "7", "ok": false, "error": {"code": "invalid_arguments", "message": "...", "details": {...}}}
Ops: tools.list, tools.get_schema, tools.call, ping, shutdown, and `cancel` ({"op": "cancel", "target": "7"},
no reply) which cancels an in-flight call whose caller gave up. `ping` answers {"pong": true, "pid": 123,
"abandoned": [{"call": "add", "seconds": 4.2, "kind": "thread"}]}: what still runs that long after its
cancel (a sync tool's "thread", which Python cannot stop, or a "task" that ignored the cancel).
A request may carry `request_id`, the gateway's id of the client request it serves (`X-Request-Id`), which
the worker names in its log lines about the call, and `traceparent` (W3C trace context) when the gateway
traces calls with OpenTelemetry: the worker names its trace id there too.

Protocol 2 adds the rest of MCP. The handshake also lists `resources`, `resourceTemplates` and `prompts`,
and `plain_tools`: the tools that take no fastmcp `Context` (the gateway's lean MCP path serves only those),
and `asking_tools`: the Context tools that may ask the client something (namespace/asks.py; a worker
without the field: every Context tool may);
new ops `resources.read` {"uri"}, `prompts.get` {"name", "arguments"} and `completion.complete` {"ref",
"argument"} answer with the MCP result object. A `tools.call` may say what the calling client supports,
{"client": {"sampling": true, "elicitation": true, "roots": false}, "progress": true, "logLevel": "info"}
(`"inputRequired": true` in "client": a 2026-07-28 caller, asked through input_required rounds, for whom a
question it did not declare is MCP's -32021 MissingRequiredClientCapability), and `"scope"`, an opaque id of
the calling MCP session (the same for each of its calls), by which fastmcp keys `ctx.set_state()`, with
the session's values (`"state"`: name -> stored object; the gateway keeps them, worker/sessionvalues.py,
and a tool's writes come back as `state` events, {"key", "value"}, a null value for a delete);
while a tool that takes a fastmcp `Context` runs, the worker sends messages tied to the call's id:
    {"op": "event", "id": "7", "event": "progress", "data": {"progress": 1, "total": 3, "message": null}}
    {"op": "event", "id": "7", "event": "log", "data": {"level": "info", "logger": null, "data": "..."}}
    {"op": "ask", "id": "7", "ask": "a1", "method": "sampling/createMessage", "params": {...}}
and the gateway answers each ask with {"op": "answer", "target": "a1", "result": {...}} or
{"op": "answer", "target": "a1", "error": {"code": -1, "message": "..."}} (an MCP error object).
Only the standard library and pydantic_core (in every worker environment through fastmcp) here: both sides
import it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pydantic_core

PROTOCOL_VERSION = 2
# A `tools.call`, `prompts.get` or `resources.read` may carry `inputResponses` and `requestState` (a guard's
# next round, MCP 2026-07-28); a guard asking for input answers an empty result whose `_meta` holds its
# InputRequiredResult under this key (worker/guard.py, runtime/mcp/inputreq.py).
INPUT_REQUIRED = "io.tooldock/inputRequired"
MAX_LINE_BYTES = 16 * 1024 * 1024

OPS = frozenset(
    {
        "tools.list",
        "tools.get_schema",
        "tools.call",
        "ping",
        "shutdown",
        "cancel",
        "resources.read",
        "prompts.get",
        "completion.complete",
        "answer",
        "visibility.hidden",
    }
)
# A Context tool's `changed` event names one of these: fastmcp told the session its lists changed (a session's
# visibility rules did: worker/visibility.py); the gateway sends it on to the calling session.
LIST_CHANGED = frozenset(
    {"notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed"}
)
# Handshake fields beside `tools`: what MCP lists besides tools, as MCP descriptors.
SURFACE_KINDS = ("resources", "resourceTemplates", "prompts")
ERROR_CODES = frozenset(
    {"tool_not_found", "invalid_arguments", "dependency_error", "execution_timeout", "internal_error", "not_found"}
)


# Built once: `json.dumps` with options builds an encoder on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def tools_of(
    handshake: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, dict[str, dict[str, Any]]]]:
    """A handshake's tools as declared; by name those whose schemas have `$ref`s with them inlined
    (`inlined_tools`); and a versioned tool's other versions, by name and version (`tool_versions`). None of
    either from a worker older than the field."""
    inlined = handshake.get("inlined_tools")
    flat = {t["name"]: t for t in inlined if isinstance(t, dict)} if isinstance(inlined, list) else {}
    versions = handshake.get("tool_versions")
    older = {
        name: {v: d for v, d in by_version.items() if isinstance(v, str) and isinstance(d, dict)}
        for name, by_version in (versions.items() if isinstance(versions, dict) else ())
        if isinstance(name, str) and isinstance(by_version, dict)
    }
    return list(handshake.get("tools") or []), flat, older


def tool_kinds(handshake: dict[str, Any]) -> tuple[frozenset[str], frozenset[str] | None]:
    """A handshake's `plain_tools`, and its `asking_tools` (None from a worker that does not say: all may ask)."""

    def names(value: Any) -> frozenset[str]:
        return frozenset(n for n in value if isinstance(n, str)) if isinstance(value, list) else frozenset()

    asking = handshake.get("asking_tools")
    return names(handshake.get("plain_tools")), names(asking) if isinstance(asking, list) else None


# JSON on the hot path goes through pydantic_core (which fastmcp brings into every worker environment):
# its encoder and parser take a fifth of the json module's time for a call's messages, 4% of a call through
# the gateway at 1 concurrent. What it refuses goes to the json module, which decides as it did before: a
# lone surrogate, nesting past its limits, a circular reference, a UTF-8 byte order mark.


def dump(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON (raises what the json module raises). Values JSON has no type for are
    written as pydantic writes them (a datetime in ISO 8601, a set as a list, an Enum as its value: what the
    MCP SDK sends for them), and else as `str()`, as before."""
    try:
        return pydantic_core.to_json(value, fallback=str)
    except (ValueError, RecursionError):
        return _ENCODER.encode(value).encode()


def parse(data: bytes | str) -> Any:
    """`json.loads(data)`, faster; the same values and errors."""
    try:
        return pydantic_core.from_json(data)
    except ValueError:
        return json.loads(data)


def encode(message: dict[str, Any]) -> bytes:
    try:
        return dump(message) + b"\n"
    except UnicodeEncodeError:  # a lone surrogate (a tool made one): sent as U+FFFD rather than not at all
        text = _ENCODER.encode(message)
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    try:
        message = parse(line)
    except RecursionError:
        raise ValueError("a protocol message is nested too deeply") from None
    if not isinstance(message, dict):
        raise ValueError("a protocol message must be a JSON object")
    return message


def ok(request_id: Any, result: Any, latency_ms: int | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = {"id": request_id, "ok": True, "result": result}
    if latency_ms is not None:
        reply["latency_ms"] = latency_ms
    return reply


def error(request_id: Any, code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    assert code in ERROR_CODES, code
    body: dict[str, Any] = {"code": code, "message": message}
    if details:
        body["details"] = details
    return {"id": request_id, "ok": False, "error": body}


def refusal(exc: BaseException) -> dict[str, Any]:
    """A question to the client that failed, as the JSON-RPC error the tool gets: an MCP error's own code
    (the client's refusal), else -32603 (internal error). The worker client's and the relay client's."""
    code = getattr(getattr(exc, "error", None), "code", None)
    return {"code": code if isinstance(code, int) else -32603, "message": str(exc) or type(exc).__name__}


# The worker's line on stderr once it serves: "[ns] worker ready on SOCKET with N tool(s)".
READY_LINE = "worker ready on"


def exit_message(exc: SystemExit) -> str:
    """A tool that called sys.exit() (argparse on bad arguments, a CLI's main() wrapped as a tool) fails its
    call with this; the worker serves on."""
    return f"the tool called sys.exit({exc.code!r}); a tool reports a failure by raising an exception"


def round_fields(request: dict[str, Any]) -> dict[str, Any]:
    """The guard's fields of a worker request (`inputResponses`, `requestState`) that are well formed, as
    the MCP request's params carry them."""
    fields: dict[str, Any] = {}
    responses, state = request.get("inputResponses"), request.get("requestState")
    if isinstance(responses, dict) and responses:
        fields["inputResponses"] = responses
    if isinstance(state, str):
        fields["requestState"] = state
    return fields


def scope_of(request: dict[str, Any]) -> str | None:
    """The calling MCP session's scope a request carries (`scope`: 32 hex digits, runtime/mcp/scope.py), if
    well formed: the worker keys the session's `ctx.set_state()` by it."""
    scope = request.get("scope")
    if isinstance(scope, str) and len(scope) == 32 and all(c in "0123456789abcdef" for c in scope):
        return scope
    return None


def visibility_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The calling MCP session's visibility rules a request carries (`visibility`: fastmcp's rule objects,
    worker/visibility.py), those that are objects; none when it carries none."""
    rules = request.get("visibility")
    return [rule for rule in rules if isinstance(rule, dict)] if isinstance(rules, list) else []


# A session's `ctx.set_state()` values (worker/sessionvalues.py, kept by the gateway): their names' length,
# and their size as JSON, checked by the worker when a tool writes one and by the gateway when it keeps it.
MAX_STATE_NAME = 1024
MAX_STATE_BYTES = 1024 * 1024


def state_refusal(values: dict[str, Any], name: str, value: Any) -> str | None:
    """Why a session may not keep `value` under `name` beside its `values` (the limits above); None if it may."""
    if len(name) > MAX_STATE_NAME:
        return f"a session state key is at most {MAX_STATE_NAME} characters long (got {len(name)})"
    size = len(json.dumps({**values, name: value}, default=str))
    if size > MAX_STATE_BYTES:
        return (
            f"a session's state is limited to {MAX_STATE_BYTES} bytes of JSON (this value would make it {size}); "
            "delete what is no longer needed with ctx.delete_state()"
        )
    return None


def state_of(request: dict[str, Any]) -> dict[str, Any]:
    """The calling MCP session's `ctx.set_state()` values a request carries (`state`: name -> fastmcp's
    stored object, worker/sessionvalues.py), those that are objects; none when it carries none."""
    values = request.get("state")
    if not isinstance(values, dict):
        return {}
    return {name: value for name, value in values.items() if isinstance(name, str) and isinstance(value, dict)}


def error_text(result: dict[str, Any]) -> str:
    """The text of an MCP tool result's text blocks, joined: what an `isError` result says went wrong."""
    return " ".join(str(c.get("text", "")) for c in result.get("content") or [] if c.get("type") == "text")


# MCP's log levels, lowest first: the gateway's relays and the worker's channel (direct.py) filter by them.
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def shown_level(data: dict[str, Any], threshold: str | None) -> str | None:
    """A log message's level (`info` when it names none MCP knows), or None when it is below `threshold`
    (the level the client set with `logging/setLevel`; None: every level)."""
    level = data.get("level") if data.get("level") in LOG_LEVELS else "info"
    if threshold and LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
        return None
    return str(level)


class LineStream(asyncio.Protocol):
    """A protocol connection's reading side, on both ends: each complete line goes to `line_received` as the
    bytes arrive, in the event loop's own callback. A stream reader needs a task that wakes for every line
    (measured: one task wake-up a message, about a tenth of a worker's CPU for a cheap call). Also the
    writer an `Outbox` writes to: `write`, `is_closing`, and `drain`, which waits while the transport's
    buffer is over its high-water mark, as `StreamWriter.drain` does."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self.transport: Any = None
        self._buffer = bytearray()
        self._paused = False
        self._waiters: list[asyncio.Future[None]] = []
        self.disconnected = False  # connection_lost has run

    # -- what a subclass does with the connection ----------------------------------------------------
    def line_received(self, line: bytes) -> None:
        raise NotImplementedError

    def too_long(self) -> None:
        """A line over `limit` bytes: the connection cannot go on (what is left of the line is unframed)."""
        self.close()

    def lost(self, exc: Exception | None) -> None:
        """The connection is gone (EOF, an error, or our own close)."""

    # -- asyncio.Protocol ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        if not buffer and data.find(b"\n") == len(data) - 1 and len(data) <= self.limit:
            self.line_received(data)  # the common case: one whole message in one read
            return
        buffer += data
        start = 0
        while not self.disconnected and not self.transport.is_closing():
            end = buffer.find(b"\n", start)
            if end < 0 or end + 1 - start > self.limit:
                break
            line = bytes(buffer[start : end + 1])
            start = end + 1
            self.line_received(line)
        del buffer[:start]
        if len(buffer) > self.limit and not self.transport.is_closing():
            buffer.clear()
            self.too_long()

    def eof_received(self) -> bool | None:
        return None  # close the transport: the peer sends no more

    def connection_lost(self, exc: Exception | None) -> None:
        self.disconnected = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(ConnectionResetError("the protocol connection is closed"))
        self._waiters.clear()
        self.lost(exc)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    # -- the writer an Outbox writes to ---------------------------------------------------------------
    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def is_closing(self) -> bool:
        return self.disconnected or self.transport is None or self.transport.is_closing()

    async def drain(self) -> None:
        if self.disconnected:
            raise ConnectionResetError("the protocol connection is closed")
        if not self._paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Outbox:
    """The writing side of a protocol connection, on both ends: the lines written in one event-loop turn go
    out in one write, so under load one system call (and one wake-up of the other process) carries many
    messages instead of one each. A sender waits only when more than `high_water` bytes are queued (the
    other side is not reading); on a closed connection it gets ConnectionResetError."""

    def __init__(self, writer: LineStream, high_water: int) -> None:
        self.writer, self.high_water = writer, high_water
        self._pending: list[bytes] = []
        self._drain = asyncio.Lock()  # one drain at a time

    def post(self, data: bytes, alone: bool = False) -> None:
        """Queue `data` for the end of this turn, without waiting for the other side to read. `alone`: the
        sender knows nothing else goes out this turn (the only call in flight on the connection), so it is
        written now, a pass of the event loop sooner."""
        if self.writer.is_closing():
            raise ConnectionResetError("the protocol connection is closed")
        if alone and not self._pending:
            self.writer.write(data)
            return
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(data)

    async def send(self, data: bytes, alone: bool = False) -> None:
        self.post(data, alone)
        if self.writer.transport.get_write_buffer_size() > self.high_water:
            async with self._drain:
                await self.writer.drain()

    def flush(self) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        if data and not self.writer.is_closing():
            self.writer.write(data)
