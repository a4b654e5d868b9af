"""The namespace as a FastMCP server inside the worker, for what needs more than `Tool.run`.

Resources, resource templates, prompts, and tools that take a fastmcp `Context` run through a real
FastMCP server here. That keeps every Context feature (progress, logging, sampling, elicitation,
cancellation) exactly as fastmcp implements it. What the tool sends is relayed to the gateway over the
worker protocol (`event` and `ask` messages), and the gateway relays it to the MCP client that made the
call. Requests are handed to the server's request runner directly (direct.py), as an MCP session's
dispatcher would hand them over, with no client or transport between.

Plain tools do not come here: `WorkerServer` runs them with `Tool.run`.
"""

from __future__ import annotations

import enum
import inspect
import typing
from collections.abc import Awaitable, Callable
from types import UnionType
from typing import Any

from fastmcp.utilities.tasks import TaskConfig

from tooldock.namespace.extract import LoadedNamespace, own_meta
from tooldock.namespace.versions import FASTMCP_META
from tooldock.worker.callcontext import install
from tooldock.worker.direct import DirectCalls
from tooldock.worker.guard import GuardServer
from tooldock.worker.protocol import INPUT_REQUIRED

Ask = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
Event = Callable[[str, dict[str, Any]], Awaitable[None]]


class Relay:
    """The gateway side of one call: where progress and log events go, and who answers requests."""

    def __init__(self, event: Event, ask: Ask, client: dict[str, Any]) -> None:
        self.event, self.ask = event, ask
        self.client = client  # what the calling MCP client supports: {"sampling": bool, "elicitation": bool, ...}
        self.rounds: dict[str, Any] = {}  # a guard's inputResponses / requestState (protocol.round_fields)
        self.scope: str | None = None  # the calling MCP session's: `ctx.set_state()` is kept by it (protocol.scope_of)
        self.visibility: list[dict[str, Any]] = []  # the session's visibility rules (visibility.py)
        self.state: dict[str, Any] = {}  # the session's `ctx.set_state()` values (sessionvalues.py)
        self.request: dict[str, Any] = {}  # what the tool reads of the client's request (callcontext.py)


class Bridge:
    def __init__(self, namespace: str, loaded: LoadedNamespace) -> None:
        self.loaded = loaded
        self.server: GuardServer = GuardServer(namespace)
        self.server.rules.loaded = loaded  # what a session's visibility rules are matched against
        served = {id(t) for t in loaded.tools.values()}
        older = [t for versions in loaded.versions.values() for t in versions.values() if id(t) not in served]
        for tool in [*loaded.tools.values(), *older]:  # every version of a versioned tool: a call may ask for one
            # The gateway runs tasks (runtime/mcp/tasks.py); in here every call is a plain one, and fastmcp
            # refuses to serve `task=True` tools without a tasks extension of its own.
            self.server.add_tool(tool.model_copy(update={"task_config": TaskConfig(mode="forbidden")}))
        for resource in loaded.resources.values():
            self.server.add_resource(resource)
        for template in loaded.templates.values():
            self.server.add_template(template)
        for prompt in loaded.prompts.values():
            self.server.add_prompt(prompt)
        install(self.server)  # the client's protocol version in the request context (callcontext.py)
        self.direct = DirectCalls(self.server)  # Context tool calls, straight to the server (direct.py)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        relay: Relay,
        progress: bool,
        log_level: str | None,
        version: Any = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if isinstance(version, str):  # one of a versioned tool's versions, as a FastMCP client asks for it
            params["_meta"] = {FASTMCP_META: {"version": version}}
        body = await self.direct.request("tools/call", params, relay, progress, log_level)
        meta = body.pop("_meta", None) or {}  # the tool's, and fastmcp's own bookkeeping (`wrap_result`)
        if INPUT_REQUIRED in meta:  # a guard asked for input (guard.py)
            body.update({"_meta": {INPUT_REQUIRED: meta[INPUT_REQUIRED]}, "isError": False})
        elif own := own_meta(meta):
            body["_meta"] = own
        return body

    async def read_resource(self, uri: str, relay: Relay) -> dict[str, Any]:
        """A resource's contents; its questions to the client go to `relay`, its log lines nowhere."""
        return await self.direct.request("resources/read", {"uri": uri}, relay, logs=False)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None, relay: Relay) -> dict[str, Any]:
        """A prompt's messages; its questions to the client go to `relay`, its log lines nowhere."""
        params: dict[str, Any] = {"name": name, **({"arguments": arguments} if arguments is not None else {})}
        return await self.direct.request("prompts/get", params, relay, logs=False)

    def complete(self, ref: dict[str, Any], argument: dict[str, Any]) -> dict[str, Any]:
        """Suggestions for a prompt argument or a template variable, from its type: the values of a
        `Literal[...]`, an `Enum` or a `bool` that start with what the user typed so far."""
        fn = None
        if ref.get("type") == "ref/prompt":
            prompt = self.loaded.prompts.get(str(ref.get("name")))
            fn = getattr(prompt, "fn", None)
        elif ref.get("type") == "ref/resource":
            template = self.loaded.templates.get(str(ref.get("uri")))
            fn = getattr(template, "fn", None)
        values = _choices(fn, str(argument.get("name", ""))) if fn is not None else []
        typed = str(argument.get("value", ""))
        matches = [v for v in values if v.startswith(typed)]
        return {"completion": {"values": matches[:100], "total": len(matches), "hasMore": len(matches) > 100}}


def _choices(fn: Any, parameter: str) -> list[str]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    annotation = hints.get(parameter)
    if annotation is None:
        param = inspect.signature(fn).parameters.get(parameter)
        annotation = param.annotation if param is not None else None
    return _values_of(annotation)


def _values_of(annotation: Any) -> list[str]:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return [str(v) for v in typing.get_args(annotation)]
    if origin in (typing.Union, UnionType, typing.Annotated):
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            args = args[:1]
        return [v for a in args for v in _values_of(a)]
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return [str(m.value) for m in annotation]
    if annotation is bool:
        return ["true", "false"]
    return []
