"""The namespace as a FastMCP server inside the worker, for what needs more than `Tool.run`.

Resources, resource templates, prompts, and tools that take a fastmcp `Context` run through a real
FastMCP server here. That keeps every Context feature (progress, logging, sampling, elicitation,
cancellation) exactly as fastmcp implements it. What the tool sends is relayed to the gateway over the
worker protocol (`event` and `ask` messages), and the gateway relays it to the MCP client that made the
call. A Context tool's call is handed to the server's request runner directly (direct.py); resources and
prompts are read over an in-memory MCP session (fastmcp's own in-memory transport and the SDK's
`ClientSession`).

Plain tools do not come here: `WorkerServer` runs them with `Tool.run`.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from types import UnionType
from typing import Any

import mcp_types as types
from fastmcp import FastMCP
from fastmcp.client.transports.memory import FastMCPTransport
from fastmcp.utilities.tasks import TaskConfig
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tooldock.namespace.extract import LoadedNamespace
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
        self.rounds: dict[str, Any] = {}  # a guard's input_responses / request_state (protocol.round_fields)

    def session_kwargs(self) -> dict[str, Any]:
        flags = (bool(self.client.get(k)) for k in ("sampling", "elicitation", "roots"))
        return client_callbacks(lambda: self, *flags)


def client_callbacks(
    relay_of: Callable[[], Relay | None], sampling: bool, elicitation: bool, roots: bool
) -> dict[str, Any]:
    """An in-memory session's client callbacks, forwarding to the call `relay_of()` names (a pooled session
    serves one call after another); a message that arrives after its call ended is dropped."""

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        relay = relay_of()
        if relay is not None:
            await relay.event("log", params.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def asking(method: str, params: dict[str, Any]) -> dict[str, Any]:
        relay = relay_of()
        if relay is None:
            raise MCPError(types.INTERNAL_ERROR, "the call that asked has ended")
        return await relay.ask(method, params)

    async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        try:
            result = await asking("sampling/createMessage", _dump(params))
        except MCPError as err:
            return err.error
        # As the gateway's relay decides: a request that offered tools may get tool-use content back.
        model = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        return model.model_validate(result)

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> Any:
        try:
            return types.ElicitResult.model_validate(await asking("elicitation/create", _dump(params)))
        except MCPError as err:
            return err.error

    async def on_roots(context: Any) -> Any:
        try:
            return types.ListRootsResult.model_validate(await asking("roots/list", {}))
        except MCPError as err:
            return err.error

    kwargs: dict[str, Any] = {"logging_callback": on_log}
    if sampling:
        kwargs["sampling_callback"] = on_sampling
    if elicitation:
        kwargs["elicitation_callback"] = on_elicit
    if roots:
        kwargs["list_roots_callback"] = on_roots
    return kwargs


def _asking(relay: Relay | None) -> dict[str, Any]:
    """A prompt's or a resource's session: its questions to the client relayed, its log messages not."""
    kwargs = relay.session_kwargs() if relay is not None else {}
    kwargs.pop("logging_callback", None)
    return kwargs


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _result(model: Any) -> dict[str, Any]:
    """An MCP result from the in-memory session, without the fields that session adds for its own
    client (caching hints, result type): the gateway's session adds its own."""
    body = _dump(model)
    for key in ("ttlMs", "cacheScope", "resultType"):
        body.pop(key, None)
    return body


class Bridge:
    def __init__(self, namespace: str, loaded: LoadedNamespace) -> None:
        self.loaded = loaded
        self.server: FastMCP[Any] = GuardServer(namespace)
        for tool in loaded.tools.values():
            # The gateway runs tasks (runtime/mcp/tasks.py); in here every call is a plain one, and fastmcp
            # refuses to serve `task=True` tools without a tasks extension of its own.
            self.server.add_tool(tool.model_copy(update={"task_config": TaskConfig(mode="forbidden")}))
        for resource in loaded.resources.values():
            self.server.add_resource(resource)
        for template in loaded.templates.values():
            self.server.add_template(template)
        for prompt in loaded.prompts.values():
            self.server.add_prompt(prompt)
        self.direct = DirectCalls(self.server)  # Context tool calls, straight to the server (direct.py)

    @contextlib.asynccontextmanager
    async def session(self, **kwargs: Any) -> AsyncIterator[ClientSession]:
        async with FastMCPTransport(self.server).connect_session(**kwargs) as session:
            await session.initialize()
            yield session

    async def call_tool(
        self, name: str, arguments: dict[str, Any], relay: Relay, progress: bool, log_level: str | None
    ) -> dict[str, Any]:
        body = dict(await self.direct.call_tool(name, arguments, relay, progress, log_level))
        for key in ("ttlMs", "cacheScope", "resultType"):  # the wire result's, for a client of its own
            body.pop(key, None)
        meta = body.pop("_meta", None) or {}  # fastmcp's own bookkeeping (`wrap_result`), not the tool's
        if INPUT_REQUIRED in meta:  # a guard asked for input (guard.py)
            body.update({"_meta": {INPUT_REQUIRED: meta[INPUT_REQUIRED]}, "isError": False})
        return body

    async def read_resource(self, uri: str, relay: Relay | None = None, **rounds: Any) -> dict[str, Any]:
        async with self.session(**_asking(relay)) as session:
            return _result(await session.read_resource(uri, **rounds))

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None, relay: Relay | None = None, **rounds: Any
    ) -> dict[str, Any]:
        async with self.session(**_asking(relay)) as session:
            return _result(await session.get_prompt(name, arguments, **rounds))

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
