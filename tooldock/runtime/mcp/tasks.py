"""The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for 2026-07-28 clients, on the SDK's
extension machinery (`mcp.server.extension`): `tasks/get`, `tasks/update` and `tasks/cancel` as its methods,
and its `tools/call` interceptor turning a call into a task.

Which tools run as tasks: fastmcp's `@tool(task=True)` (`"optional"`) or `@tool(task=TaskConfig(mode="required"))`,
seen in the tool's `execution.taskSupport`, or the namespace's `tooldock.yaml` (`tasks: {optional: [globs],
required: [globs]}`); the stronger of the two wins. A 2026-07-28 client that declared the extension (for the
connection or in this request's `_meta`) gets a `CreateTaskResult` at once for such a tool; one that did not
gets a plain result from an optional tool and -32021 from a required one. Older clients cannot read tasks:
they get plain calls (as the lean path, runtime/mcp/lean.py, answers them too).

The task runs in the gateway, not in the request that started it: the same engine call as a plain
`tools/call`, so the namespace's time limit and concurrency bound it. A Context tool that asks for
elicitation, sampling or roots parks the task in `input_required` with the request in `inputRequests`
until `tasks/update` answers it; a question its client did not declare fails the task with -32021.

With gateway replicas sharing a state store, `TaskSharing` (tasksharing.py) writes each task through to it:
`tasks/*` work on any replica, and a task whose replica died is failed once its lease runs out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import CLIENT_CAPABILITIES_META_KEY, RequestParams
from mcp_types.jsonrpc import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field, ValidationError

from tooldock.errors import (
    DependencyError,
    ExecutionTimeout,
    InvalidArguments,
    RateLimited,
    StateUnavailable,
    ToolDockError,
    ToolFailed,
    UpstreamError,
)
from tooldock.namespace.versions import CALL_VERSION, asked_version, version_refusal
from tooldock.runtime import jsonin, requestid
from tooldock.runtime.access import key_of_request
from tooldock.runtime.engine import Engine
from tooldock.runtime.mcp.callcontext import of_sdk_request
from tooldock.runtime.mcp.caller import calling
from tooldock.runtime.mcp.results import error_payload, error_result, state_error
from tooldock.runtime.mcp.tasklisten import TaskListen
from tooldock.runtime.mcp.tasksharing import RemoteTask, TaskSharing
from tooldock.runtime.mcp.taskstore import Task, TaskRelay, TaskStore, TooManyTasks, check_answer
from tooldock.runtime.questions import declared as declared_capabilities
from tooldock.runtime.questions import unmet
from tooldock.runtime.workerclient import round_fields
from tooldock.worker.protocol import INPUT_REQUIRED

log = logging.getLogger(__name__)

TASKS = "io.modelcontextprotocol/tasks"
GUARD_GRACE = 1.0  # seconds a Context tool's first round may take to ask for input before its task is announced
MODES = ("forbidden", "optional", "required")


class AnyParams(RequestParams):
    """What the SDK hands a `tasks/*` handler: anything; the handler checks it, to say exactly what is wrong."""

    model_config = ConfigDict(extra="allow")


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId", min_length=1, max_length=200)


class UpdateParams(TaskParams):
    input_responses: dict[str, dict[str, Any]] = Field(alias="inputResponses")


def mode_of(tool: dict[str, Any], config: Any) -> str:
    """`forbidden`, `optional` or `required`: the tool's own declaration or the namespace's, the stronger."""
    declared = (tool.get("execution") or {}).get("taskSupport")
    found = MODES.index(declared) if declared in MODES else 0
    name = str(tool.get("name"))
    if any(fnmatchcase(name, g) for g in config.tasks_required):
        found = 2
    elif any(fnmatchcase(name, g) for g in config.tasks_optional):
        found = max(found, 1)
    return MODES[found]


def declared(ctx: Any) -> bool:
    """Whether this request's client declared the tasks extension (for its connection, or in `_meta`)."""
    if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
        return False  # the extension's results are 2026-07-28 vocabulary: older clients cannot read them
    caps = getattr(ctx.session, "client_capabilities", None)
    if caps is not None and TASKS in (caps.extensions or {}):
        return True
    meta = ctx.meta if isinstance(ctx.meta, dict) else {}
    extensions = (meta.get(CLIENT_CAPABILITIES_META_KEY) or {}).get("extensions") or {}
    return isinstance(extensions, dict) and TASKS in extensions


def missing_extension(what: str) -> MCPError:
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} needs the {TASKS} extension: declare it in the client's capabilities.extensions",
        {"requiredCapabilities": {"extensions": {TASKS: {}}}},
    )


def _rpc_error(code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"code": code, "message": message, **({"data": data} if data is not None else {})}


def outcome(err: ToolDockError) -> tuple[str, dict[str, Any]]:
    """How a failed call ends its task: the tool's own failure is `completed` with an `isError` result (as a
    plain call answers); the gateway not getting a result (time limit, crash, unavailable, a JSON-RPC error
    from an upstream server or raised by the tool as `MCPError`) is `failed` with a JSON-RPC error."""
    details = err.details or {}
    if isinstance(err, InvalidArguments):  # checked by the tool's schema, whichever way it was reported
        return "completed", error_payload(err)
    if isinstance(err, UpstreamError) or "rpc_code" in details:
        code = details.get("rpc_code")
        message = str(details.get("rpc_message") or err.message)
        return "failed", _rpc_error(
            code if isinstance(code, int) else types.INTERNAL_ERROR, message, details.get("rpc_data")
        )
    if isinstance(err, ExecutionTimeout):
        return "failed", _rpc_error(REQUEST_TIMEOUT, err.message, err.to_dict())
    if isinstance(err, (ToolFailed, DependencyError)):
        return "completed", error_payload(err)
    return "failed", _rpc_error(types.INTERNAL_ERROR, f"{err.code}: {err.message}", err.to_dict())


class TasksExtension(Extension):
    identifier = TASKS

    def __init__(self, namespace: str, engine: Engine, session_key: Callable[[Any], Any], bus: Any = None) -> None:
        self.namespace, self.engine, self.session_key = namespace, engine, session_key
        self.bus = bus  # the namespace's subscriptions/listen bus: status notifications ride its streams
        settings = engine.settings
        self.store = TaskStore(settings.task_ttl, settings.max_tasks)
        self.sharing = TaskSharing.of(namespace, engine.admission.store, self.store)  # replicas: tasksharing.py
        self._runners: set[asyncio.Task[None]] = set()

    def methods(self) -> Sequence[MethodBinding]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (
            MethodBinding("tasks/get", AnyParams, self.get, versions),
            MethodBinding("tasks/update", AnyParams, self.update, versions),
            MethodBinding("tasks/cancel", AnyParams, self.cancel, versions),
        )

    async def _task(
        self, ctx: Any, raw: AnyParams, model: type[TaskParams] = TaskParams
    ) -> tuple[Any, Task | RemoteTask]:
        """The params and the caller's task, after the checks every `tasks/*` method makes (SEP-2663, SEP-2243)."""
        if not declared(ctx):
            raise missing_extension(f"{ctx.method}")
        try:
            params = model.model_validate(raw.model_dump(by_alias=True), by_name=False)
        except ValidationError as err:
            problem = err.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "params"
            raise MCPError(types.INVALID_PARAMS, f"{ctx.method}: {where}: {problem['msg']}") from None
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        name = headers.get(MCP_NAME_HEADER) if headers is not None else None
        if name is not None and decode_header_value(name) != params.task_id:
            raise MCPError(HEADER_MISMATCH, f"{MCP_NAME_HEADER} header does not match the request body's 'taskId'")
        task: Task | RemoteTask | None = self.store.get(params.task_id, _owner(ctx))
        if task is None and self.sharing is not None:  # run by another replica: as the store has it
            try:
                task = await self.sharing.find(params.task_id, _owner(ctx))
            except StateUnavailable as err:
                raise state_error(err) from err
        if task is None:
            raise self._unknown(params.task_id)
        return params, task

    def _unknown(self, task_id: str) -> MCPError:
        return MCPError(
            types.INVALID_PARAMS,
            f"unknown task {task_id!r} in namespace {self.namespace!r}: never created here, "
            f"created by another caller, or expired ({self.store.ttl:g}s after its creation)",
        )

    async def _forward(self, task: RemoteTask, op: str, responses: dict[str, Any] | None = None) -> None:
        assert self.sharing is not None
        try:
            known = await self.sharing.forward(task, op, responses)
        except StateUnavailable as err:
            raise state_error(err) from err
        if not known:
            raise self._unknown(task.id)

    async def get(self, ctx: Any, raw: AnyParams) -> dict[str, Any]:
        return (await self._task(ctx, raw))[1].detailed()

    async def update(self, ctx: Any, raw: AnyParams) -> dict[str, Any]:
        params, task = await self._task(ctx, raw, UpdateParams)
        for key, response in params.input_responses.items():
            method = task.waiting_for(key)
            if method is None:
                continue  # answered already, or never asked: nothing waits for it
            try:
                check_answer(method, response)
            except ValidationError as err:
                problem = err.errors()[0]
                where = ".".join(str(p) for p in problem["loc"])
                raise MCPError(
                    types.INVALID_PARAMS, f"inputResponses[{key!r}] is not a {method} result: {where} {problem['msg']}"
                ) from None
        if isinstance(task, RemoteTask):
            await self._forward(task, "update", params.input_responses)
        else:
            self.store.answer(task, params.input_responses)
        return {"resultType": "complete"}

    async def cancel(self, ctx: Any, raw: AnyParams) -> dict[str, Any]:
        task = (await self._task(ctx, raw))[1]
        if isinstance(task, RemoteTask):
            await self._forward(task, "cancel")
        else:
            self.store.cancel(task)
        return {"resultType": "complete"}

    async def intercept_tool_call(self, params: types.CallToolRequestParams, ctx: Any, call_next: Any) -> Any:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)  # older clients cannot read tasks: every tool is a plain call for them
        session, key = self.session_key(ctx), key_of_request(getattr(ctx, "request", None))
        try:
            tool = self.engine.get_tool(self.namespace, params.name, session, key)
            entry = self.engine.namespace(self.namespace, key)
        except ToolDockError:
            return await call_next(ctx)  # the plain path says what is wrong, as it always does
        if version_refusal(params.name, params.meta, tool.get("_meta")):  # not served: the plain path refuses it
            return await call_next(ctx)
        CALL_VERSION.set(asked_version(params.meta))  # the task's runner inherits it (FastMCP's `version=`)
        mode = mode_of(tool, entry.source.config)
        if mode == "forbidden" or jsonin.problem(params.arguments or {}, "arguments") is not None:
            return await call_next(ctx)
        if not declared(ctx):
            if mode == "required":
                raise missing_extension(f"tool {params.name!r} runs only as a task: it")
            return await call_next(ctx)
        try:  # the rate limits count the call now, as a plain call's: a refused one never becomes a task
            if self.engine.limited(entry, key):
                await self.engine.admit(entry, key)
        except RateLimited as err:
            self.engine.refused(self.namespace, params.name, err, key)
            return error_result(err)
        except StateUnavailable as err:  # not refused by a limit: no limit could be looked at
            raise state_error(err) from err
        try:
            task = self.store.create(key.id if key is not None else None, params.name)
        except TooManyTasks as err:
            raise MCPError(types.INTERNAL_ERROR, str(err)) from None
        try:  # with replicas: in the store before anything runs (tasksharing.py)
            await self.sharing.created(task) if self.sharing is not None else None
        except StateUnavailable as err:
            raise state_error(err) from err
        client = declared_capabilities(ctx.session.client_capabilities)
        relay = TaskRelay(self.store, task, client, session)
        relay.request = of_sdk_request(ctx)
        # A Context tool may be a guard that asks for input before it goes async (SEP-2663 on SEP-2322): its
        # first round gets a moment to answer `input_required`, which this request then returns instead.
        # A tool whose code never asks (a Context tool that only reports progress and logs) is announced at once.
        guardless = entry.source.is_upstream or not self.engine.may_ask(self.namespace, params.name)
        early = None if guardless else asyncio.Future[Any]()
        runner = asyncio.create_task(self._run(task, ctx, params, relay, key, early), name=f"mcp task {task.id}")
        task.runner = runner
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)
        if early is not None:
            parked = asyncio.ensure_future(task.parked.wait())
            await asyncio.wait({early, runner, parked}, timeout=GUARD_GRACE, return_when=asyncio.FIRST_COMPLETED)
            parked.cancel()
            if early.done():  # the guard's questions: inputreq.InputRounds makes them the input_required answer
                self.store.discard(task)
                self.sharing.discard(task) if self.sharing is not None else None
                return types.CallToolResult.model_validate(early.result())
            early.cancel()  # announced: from now on its questions wait in the task
        return task.created_result()

    async def _run(
        self, task: Task, ctx: Any, params: types.CallToolRequestParams, relay: TaskRelay, key: Any, early: Any
    ) -> None:
        requestid.current.set(requestid.of_scope(getattr(ctx, "request", None)))
        arguments, rounds = params.arguments or {}, None
        try:
            while True:  # a guard's rounds: its questions wait in the task, its next round gets the answers
                token = round_fields.set(rounds) if rounds is not None else None
                try:
                    with calling(ctx):
                        result = await self.engine.call_tool(
                            self.namespace,
                            params.name,
                            arguments,
                            relay,
                            session=relay.session_key,
                            key=key,
                            admitted=rounds is None,  # the first round was admitted at tools/call
                        )
                finally:
                    if token is not None:
                        round_fields.reset(token)
                carried = (result.get("_meta") or {}).get(INPUT_REQUIRED)
                if not isinstance(carried, dict):
                    break
                if early is not None and not early.done():
                    early.set_result(result)
                    return
                requests = dict(carried.get("inputRequests") or {})
                if (error := unmet(relay.client, requests)) is not None:  # never parked for an answer that cannot come
                    raise error
                answers = await self.store.ask_all(task, requests)
                rounds = {"inputResponses": answers}
                if isinstance(carried.get("requestState"), str):
                    rounds["requestState"] = carried["requestState"]
            body = types.CallToolResult.model_validate(result).model_dump(mode="json", by_alias=True, exclude_none=True)
            self.store.finish(task, "completed", result=body)
        except asyncio.CancelledError:
            self.store.finish(task, "cancelled")
        except MCPError as err:
            self.store.finish(task, "failed", error=_rpc_error(err.error.code, err.error.message, err.error.data))
        except ToolDockError as err:
            status, value = outcome(err)
            if status == "completed":
                self.store.finish(task, "completed", result=value)
            else:
                self.store.finish(task, "failed", error=value)
        except Exception:  # never lose a task to a gateway bug: it fails, and the log has the traceback
            log.exception("task %s (%s/%s) failed", task.id, self.namespace, params.name)
            self.store.finish(task, "failed", error=_rpc_error(types.INTERNAL_ERROR, "internal error"))


def install_tasks(server: Any, extension: TasksExtension) -> None:
    """Apply the extension to a low-level server the way `MCPServer(extensions=[...])` does: its methods
    (refused at older protocol versions), its `tools/call` interceptor, its capability advertisement."""
    from mcp.server.extension import compose_tool_call_handler

    for method in extension.methods():
        server.add_request_handler(method.method, method.params_type, _gated(method))
    call = server.get_request_handler("tools/call")
    server.add_request_handler("tools/call", call.params_type, compose_tool_call_handler([extension], call.handler))
    listen = server.get_request_handler("subscriptions/listen")
    if listen is not None and extension.bus is not None:  # `taskIds` in a listen filter: tasklisten.py
        served = TaskListen(listen.handler, extension.bus, extension.store, declared, _owner, extension.sharing)
        server.add_request_handler("subscriptions/listen", listen.params_type, served)
    server.extensions[extension.identifier] = extension.settings()


def _owner(ctx: Any) -> str | None:
    key = key_of_request(getattr(ctx, "request", None))
    return key.id if key is not None else None


def _gated(method: MethodBinding) -> Any:
    versions = method.protocol_versions or frozenset()

    async def handler(ctx: Any, params: Any) -> Any:
        if ctx.protocol_version not in versions:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", method.method)
        return await method.handler(ctx, params)

    return handler
