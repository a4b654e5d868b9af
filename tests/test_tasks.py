"""The MCP tasks extension (`io.modelcontextprotocol/tasks`) through a real gateway, with the official SDK 2.x
client on protocol 2026-07-28: tools opted in by fastmcp's `@tool(task=...)` and by tooldock.yaml, create,
poll, update (input requests), cancel, a client that goes away, the namespace's time limit, bad task ids.

The fixture is tests/fixtures/tasks/jobs (the same namespace the conformance suite's tasks scenarios use).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Literal

import mcp_types as types
import pytest
from mcp_types import RequestParams, Result
from pydantic import ConfigDict, Field, TypeAdapter

FIXTURE = Path(__file__).parent / "fixtures" / "tasks"
TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")
RAW = TypeAdapter(dict[str, Any])  # the `tasks/update` and `tasks/cancel` acks, as the wire has them


# --- the client side of the extension, as an SDK 2.x user writes it -------------------------------------


class _TaskFields(Result):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")
    status: str
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(default=None, alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
    status_message: str | None = Field(default=None, alias="statusMessage")


class CreatedTask(_TaskFields):
    result_type: Literal["task"] = Field(alias="resultType")


class DetailedTask(_TaskFields):
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    pending: dict[str, Any] | None = Field(default=None, alias="inputRequests")


class TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(serialization_alias="taskId")


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(serialization_alias="inputResponses")


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


def tasks_extension():
    """The client extension: declares the capability and finishes a task by polling `tasks/get`."""
    from mcp.client import ClientExtension, ResultClaim

    async def resolve(created: CreatedTask, ctx) -> types.CallToolResult:
        while True:
            found = await ctx.session.send_request(GetTask(params=TaskIdParams(task_id=created.task_id)), DetailedTask)
            if found.status == "completed":
                return types.CallToolResult.model_validate(found.result)
            if found.status in TERMINAL:
                raise RuntimeError(f"task {found.status}: {found.error}")
            await asyncio.sleep((found.poll_interval_ms or 500) / 1000)

    class Tasks(ClientExtension):
        identifier = TASKS

        def claims(self):
            return [ResultClaim(result_type="task", model=CreatedTask, resolve=resolve)]

    return Tasks()


class Session:
    """One SDK 2.x client on the gateway's `jobs` namespace, with the task methods spelled out."""

    def __init__(self, client) -> None:
        self.client = client

    async def start(self, tool: str, **arguments: Any) -> CreatedTask:
        created = await self.client.session.call_tool(tool, arguments, allow_claimed=True)
        assert isinstance(created, CreatedTask), created
        return created

    async def get(self, task_id: str) -> DetailedTask:
        return await self.client.session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), DetailedTask)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.client.session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), RAW)

    async def update(self, task_id: str, responses: dict[str, Any]) -> Any:
        params = UpdateParams(task_id=task_id, input_responses=responses)
        return await self.client.session.send_request(UpdateTask(params=params), RAW)

    async def until(self, task_id: str, *statuses: str, timeout: float = 20) -> DetailedTask:
        deadline = time.monotonic() + timeout
        while True:
            found = await self.get(task_id)
            if found.status in statuses or found.status in TERMINAL:
                return found
            assert time.monotonic() < deadline, f"task still {found.status} after {timeout}s"
            await asyncio.sleep(0.1)


def bare(result: dict[str, Any]) -> dict[str, Any]:
    """A result's own fields (without the `_meta` stamp every 2026-07-28 result carries)."""
    return {k: v for k, v in result.items() if k != "_meta"}


def audit(gateway, tool: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for path in gateway.audit_dir.glob("*.jsonl") for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("tool") == tool]


def run(gateway, body, *, extension: bool = True, elicitation: Any = None, mode: str = "auto",
        token: str | None = None, namespace: str = "jobs") -> Any:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        headers = gateway.headers(namespace)
        if token is not None:  # an API key instead of the bearer token
            headers["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(gateway.url + "/mcp", http_client=http)
            kwargs: dict[str, Any] = {"extensions": [tasks_extension()] if extension else []}
            if elicitation is not None:
                kwargs["elicitation_callback"] = elicitation
            async with Client(transport, mode=mode, **kwargs) as client:  # "auto" probes server/discover
                return await body(Session(client))

    return asyncio.run(main())


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    from conftest import Gateway

    tmp = tmp_path_factory.mktemp("tasks")
    shutil.copytree(FIXTURE, tmp / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"TOOLDOCK_LOG_DIR": str(tmp / "audit"), "TOOLDOCK_KEYS_DIR": str(tmp / "keys")}
    gw = Gateway(tmp / "tools", tmp / "gateway.log", env=env).start()
    gw.audit_dir, gw.keys_env = tmp / "audit", {"TOOLDOCK_KEYS_DIR": str(tmp / "keys")}
    assert gw.namespace("jobs")["state"] == "ready", gw.logs
    yield gw
    gw.stop()


# --- tests ------------------------------------------------------------------------------------------------


def test_the_extension_is_advertised_and_a_task_runs_to_its_result(gateway):
    async def body(s: Session) -> Any:
        caps = s.client.server_capabilities
        created = await s.start("slow_compute", seconds=1, label="first")
        right_after = await s.get(created.task_id)  # created durably before the answer came
        done = await s.until(created.task_id)
        resolved = await s.client.call_tool("slow_compute", {"seconds": 0.2, "label": "resolved"})
        return caps, created, right_after, done, resolved

    caps, created, right_after, done, resolved = run(gateway, body)
    assert TASKS in (caps.extensions or {})
    assert created.status == "working" and created.ttl_ms == 3_600_000 and created.poll_interval_ms == 500
    assert right_after.task_id == created.task_id and right_after.status == "working"
    assert right_after.result is None and right_after.error is None
    assert done.status == "completed", done
    assert done.result["content"][0]["text"] == "computed first after 1s"
    assert done.result["structuredContent"] == {"result": "computed first after 1s"}
    assert done.last_updated_at >= done.created_at
    assert resolved.content[0].text == "computed resolved after 0.2s"  # the SDK's claim resolver polled it


def test_plain_tools_and_clients_without_the_extension_get_plain_results(gateway):
    from mcp.shared.exceptions import MCPError

    async def with_extension(s: Session) -> Any:
        return await s.client.session.call_tool("greet", {"name": "Ada"}, allow_claimed=True)

    async def without(s: Session) -> Any:
        plain = await s.client.call_tool("slow_compute", {"seconds": 0, "label": "sync"})
        try:
            await s.client.call_tool("failing_job", {})
        except MCPError as err:
            required = err
        try:
            await s.get("anything")
        except MCPError as err:
            gated = err
        return plain, required, gated

    greeting = run(gateway, with_extension)
    assert isinstance(greeting, types.CallToolResult) and greeting.content[0].text == "Hello, Ada!"
    plain, required, gated = run(gateway, without, extension=False)
    assert isinstance(plain, types.CallToolResult) and plain.content[0].text == "computed sync after 0s"
    assert required.error.code == -32021 and "runs only as a task" in required.error.message
    assert required.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert gated.error.code == -32021


def test_tooldock_yaml_makes_a_plain_sync_tool_a_task(gateway):
    async def body(s: Session) -> Any:
        created = await s.start("nightly_report", rows=7, seconds=0.3)
        return await s.until(created.task_id)

    done = run(gateway, body)
    assert done.status == "completed" and done.result["content"][0]["text"] == "report of 7 rows"


def test_tool_errors_complete_with_is_error_and_protocol_errors_fail(gateway):
    async def body(s: Session) -> Any:
        failing = await s.start("failing_job")
        broken = await s.start("protocol_error_job")
        bad = await s.start("slow_compute", seconds="soon")  # the tool's schema refuses it, in the worker
        asking = await s.start("confirm_delete", filename=["not", "a", "string"])  # a Context tool's, too
        done = [await s.until(t.task_id) for t in (failing, broken, bad, asking)]
        return done

    failing, broken, bad, asking = run(gateway, body)
    for refused in (bad, asking):  # bad arguments: the tool's error result, as a plain call answers
        assert refused.status == "completed" and refused.result["isError"] is True, refused
    assert failing.status == "completed" and failing.result["isError"] is True
    assert "the job found nothing to do" in failing.result["content"][0]["text"]
    assert broken.status == "failed" and broken.result is None
    assert broken.error["code"] == -32603 and broken.error["message"] == "the job's backend is down"


def test_input_requests_park_the_task_until_tasks_update_answers_them(gateway):
    from mcp.shared.exceptions import MCPError

    async def body(s: Session) -> Any:
        created = await s.start("confirm_delete", filename="notes.txt")
        parked = await s.until(created.task_id, "input_required")
        key = next(iter(parked.pending))
        try:
            await s.update(created.task_id, {key: {"action": "maybe"}})
        except MCPError as err:
            bad_answer = err
        ack = await s.update(created.task_id, {key: {"action": "accept", "content": {"confirm": True}}})
        done = await s.until(created.task_id)

        several = await s.start("multi_input")
        deadline = time.monotonic() + 20
        while len((both := await s.get(several.task_id)).pending or {}) < 2:
            assert time.monotonic() < deadline, both
            await asyncio.sleep(0.1)
        first, second = list(both.pending)
        await s.update(several.task_id, {first: {"action": "accept", "content": {"name": "Ada", "confirm": True}}})
        half = await s.get(several.task_id)
        await s.update(several.task_id, {second: {"action": "accept", "content": {"name": "Bob", "confirm": True}}})
        return parked, key, bad_answer, ack, done, half, second, await s.until(several.task_id)

    async def never(context, params):  # declares elicitation; a task's questions come through tasks/get
        raise AssertionError("a task's input request reached the callback")

    parked, key, bad_answer, ack, done, half, second, finished = run(gateway, body, elicitation=never)
    assert parked.status == "input_required"
    request = parked.pending[key]
    assert request["method"] == "elicitation/create" and request["params"]["message"] == "Delete notes.txt?"
    assert bad_answer.error.code == -32602 and "is not a elicitation/create result" in bad_answer.error.message
    assert bare(ack) == {"resultType": "complete"}
    assert done.status == "completed" and done.result["content"][0]["text"] == "deleted notes.txt"
    assert half.status == "input_required" and list(half.pending) == [second]
    assert finished.status == "completed" and finished.result["content"][0]["text"] == "names: Ada, Bob"


def test_a_task_asking_for_a_capability_its_client_did_not_declare_fails_with_32021(gateway):
    """Never parked for an answer that cannot come: an imperative question (raised in the tool) and a guard's
    later round (checked by the gateway) both fail the task with MissingRequiredClientCapability."""

    async def body(s: Session) -> Any:
        asking = await s.start("confirm_delete", filename="notes.txt")
        guard = await s.start("slow_guard", seconds=1.5)
        return [await s.until(t.task_id, timeout=30) for t in (asking, guard)]

    for done in run(gateway, body):  # this client declares no elicitation
        assert done.status == "failed" and done.result is None and not done.pending, done
        assert done.error["code"] == -32021, done.error
        assert done.error["data"] == {"requiredCapabilities": {"elicitation": {}}}
        assert "elicitation" in done.error["message"]


def test_cancel_stops_the_tool_and_is_idempotent(gateway):
    async def body(s: Session) -> Any:
        created = await s.start("slow_compute", seconds=60, label="long")
        await asyncio.sleep(0.5)
        ack = await s.cancel(created.task_id)
        after = await s.get(created.task_id)
        again = await s.cancel(created.task_id)
        finished = await s.start("slow_compute", seconds=0, label="quick")
        await s.until(finished.task_id)
        late = await s.cancel(finished.task_id)
        return ack, after, again, late, await s.get(finished.task_id)

    started = time.monotonic()
    ack, after, again, late, finished = run(gateway, body)
    assert time.monotonic() - started < 20
    assert bare(ack) == {"resultType": "complete"}
    assert after.status == "cancelled" and after.result is None
    assert bare(again) == bare(late) == {"resultType": "complete"}
    assert finished.status == "completed"  # a cancel after the end changes nothing
    # The tool's call was stopped, not left running: the audit log records it as cancelled.
    gateway.wait_for(lambda: any(line["status"] == "cancelled" for line in audit(gateway, "slow_compute")),
                     timeout=10, what="the cancelled call in the audit log")


def test_a_task_outlives_the_client_that_started_it(gateway):
    async def start(s: Session) -> str:
        return (await s.start("slow_compute", seconds=2, label="orphan")).task_id

    task_id = run(gateway, start)  # the client is gone: its HTTP connections are closed

    async def later(s: Session) -> Any:
        return await s.get(task_id), await s.until(task_id)

    while_running, done = run(gateway, later)
    assert while_running.status == "working"
    assert done.status == "completed" and done.result["content"][0]["text"] == "computed orphan after 2s"


def test_unknown_and_foreign_task_ids_are_clear_errors(gateway):
    from mcp.shared.exceptions import MCPError

    async def body(s: Session) -> Any:
        errors = []
        for task_id in ("no-such-task", "x" * 200):
            try:
                await s.get(task_id)
            except MCPError as err:
                errors.append(err.error)
        for call in (s.cancel("no-such-task"), s.update("no-such-task", {})):
            try:
                await call
            except MCPError as err:
                errors.append(err.error)
        return errors

    errors = run(gateway, body)
    assert [e.code for e in errors] == [-32602] * 4
    assert "unknown task 'no-such-task' in namespace 'jobs'" in errors[0].message


def test_a_task_is_bounded_by_the_namespace_limits(make_gateway, tmp_path):
    tools = tmp_path / "src"
    shutil.copytree(FIXTURE, tools, ignore=shutil.ignore_patterns("__pycache__"))
    config = tools / "jobs" / "tooldock.yaml"
    config.write_text(config.read_text().replace("timeout: 30", "timeout: 2\n  concurrency: 1"))
    gw = make_gateway(tools, env={"MCP_TASK_TTL_SECONDS": "120"})

    async def body(s: Session) -> Any:
        created = await s.start("slow_compute", seconds=30, label="too long")
        return created, await s.until(created.task_id, timeout=15)

    started = time.monotonic()
    created, done = run(gw, body)
    assert time.monotonic() - started < 12
    assert created.ttl_ms == 120_000
    assert done.status == "failed" and done.result is None
    assert done.error["code"] == -32001 and "did not finish within 2s" in done.error["message"]

    async def two(s: Session) -> Any:  # limits.concurrency: 1 holds the second task until the first is done
        first = await s.start("slow_compute", seconds=0.8, label="first")
        second = await s.start("slow_compute", seconds=0.8, label="second")
        ended: dict[str, float] = {}
        while len(ended) < 2:
            for task in (first, second):
                if task.task_id not in ended and (await s.get(task.task_id)).status in TERMINAL:
                    ended[task.task_id] = time.monotonic()
            await asyncio.sleep(0.05)
        return [(await s.get(t.task_id)).status for t in (first, second)], abs(ended[second.task_id] -
                                                                                ended[first.task_id])

    statuses, apart = run(gw, two)
    assert statuses == ["completed", "completed"] and apart >= 0.6, (statuses, apart)

    async def crash(s: Session) -> Any:  # a worker that dies under a task: failed, not a tool error
        created = await s.start("crash_job")
        return await s.until(created.task_id, timeout=15)

    crashed = run(gw, crash)
    assert crashed.status == "failed" and crashed.result is None, crashed
    assert crashed.error["code"] == -32603 and crashed.error["data"]["code"] == "internal_error", crashed.error


def test_removed_methods_and_older_protocol_versions_get_method_not_found(gateway):
    from mcp.shared.exceptions import MCPError

    class ListTasks(types.Request[RequestParams, Literal["tasks/list"]]):
        method: Literal["tasks/list"] = "tasks/list"
        params: RequestParams

    async def probe(s: Session) -> list[Any]:
        codes = []
        for request in (ListTasks(params=RequestParams()), GetTask(params=TaskIdParams(task_id="any"))):
            try:
                await s.client.session.send_request(request, RAW)
            except MCPError as err:
                codes.append(err.error.code)
        if s.client.protocol_version == "2026-07-28":
            return codes, None, None
        plain = await s.client.call_tool("slow_compute", {"seconds": 0, "label": "legacy"})
        required = await s.client.call_tool("failing_job", {})
        return codes, plain, required

    modern, _, _ = run(gateway, probe)
    assert modern[0] == -32601  # tasks/list left the extension
    legacy, plain, required = run(gateway, probe, mode="legacy")
    assert legacy == [-32601, -32601]
    # Older clients get plain calls, of required task tools too.
    assert plain.content[0].text == "computed legacy after 0s"
    assert required.is_error and "the job found nothing to do" in required.content[0].text


def test_a_task_belongs_to_the_key_that_created_it(gateway):
    from conftest import tooldock_cli
    from mcp.shared.exceptions import MCPError

    alice, bob = (
        tooldock_cli("keys", "create", "--name", name, "--scope", "write", env=gateway.keys_env).stdout.strip()
        for name in ("alice", "bob")
    )

    async def start(s: Session) -> str:
        return (await s.start("slow_compute", seconds=0.5, label="alice's")).task_id

    task_id = run(gateway, start, token=alice)

    async def look(s: Session) -> Any:
        try:
            return await s.until(task_id)
        except MCPError as err:
            return err.error

    assert run(gateway, look, token=alice).status == "completed"
    for other in (bob, None):  # another key, and the bearer token: as if the task did not exist
        refused = run(gateway, look, token=other)
        assert refused.code == -32602 and f"unknown task {task_id!r}" in refused.message


def test_the_store_keeps_tasks_for_their_ttl_and_makes_room_with_finished_ones():
    from tooldock.runtime.mcp.taskstore import TaskStore, TooManyTasks

    now = [1000.0]
    store = TaskStore(ttl=60, max_tasks=2, clock=lambda: now[0])
    first, second = store.create(None, "a"), store.create("key1", "b")
    assert store.get(first.id, None) is first and store.get(second.id, None) is None  # owner-bound
    with pytest.raises(TooManyTasks, match="2 tasks are running"):
        store.create(None, "c")  # both still running: nothing to drop
    store.finish(first, "completed", result={"content": []})
    third = store.create(None, "c")  # the finished one made room
    assert store.get(first.id, None) is None and len(store) == 2
    store.finish(third, "completed", result={"content": []})
    now[0] += 59
    assert store.get(third.id, None) is third  # kept for its whole ttl...
    now[0] += 2
    assert store.get(third.id, None) is None  # ...and dropped after it
    assert store.get(second.id, "key1") is second  # a running task is never dropped
    assert third.created_result()["ttlMs"] == 60_000


def test_a_guard_asks_for_input_first_then_goes_on_as_a_task(gateway):
    """SEP-2663 on SEP-2322: round 1 is `input_required` (no task yet), the retry with the answer is a task."""
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def body(s: Session) -> Any:
        first = await s.client.session.call_tool("test_tool_with_task", {}, allow_input_required=True,
                                                 allow_claimed=True)
        resolved = await s.client.call_tool("test_tool_with_task", {})  # the SDK drives both rounds, then polls
        return first, resolved

    first, resolved = run(gateway, body, elicitation=elicit)
    assert isinstance(first, types.InputRequiredResult) and list(first.input_requests) == ["user_name"]
    assert "taskId" not in first.model_dump(by_alias=True)
    assert asked == ["What is your name?"]
    assert resolved.content[0].text == "Hello, Ada!"


def test_a_guard_that_asks_after_its_task_started_waits_in_the_task(gateway):
    async def body(s: Session) -> Any:
        created = await s.start("slow_guard", seconds=1.5)
        parked = await s.until(created.task_id, "input_required")
        await s.update(created.task_id, {"color": {"action": "accept", "content": {"color": "blue"}}})
        return parked, await s.until(created.task_id)

    parked, done = run(gateway, body, elicitation=lambda *a: None)
    assert parked.status == "input_required" and list(parked.pending) == ["color"]
    assert parked.pending["color"]["method"] == "elicitation/create"
    assert done.status == "completed", done
    assert done.result["content"][0]["text"] == "painted blue (state asked-once)"  # the guard's own requestState


@pytest.mark.parametrize(
    "method, params, expected",
    [
        ("tasks/get", {}, "taskId"),
        ("tasks/get", {"taskId": 7}, "taskId"),
        ("tasks/get", {"taskId": ""}, "taskId"),
        ("tasks/cancel", {"taskId": ["x"]}, "taskId"),
        ("tasks/update", {"taskId": "t"}, "inputResponses"),
        ("tasks/update", {"taskId": "t", "inputResponses": "yes"}, "inputResponses"),
        ("tasks/update", {"taskId": "t", "inputResponses": {"k": 5}}, "inputResponses"),
    ],
)
def test_malformed_task_requests_are_invalid_params(gateway, method, params, expected):
    """Raw 2026-07-28 requests: every malformed `tasks/*` body is -32602 naming the field, never a 500."""
    import httpx

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {**gateway.headers("jobs"), "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": method}
    reply = httpx.post(gateway.url + "/mcp", json=body, headers=headers, timeout=30)
    assert reply.status_code < 500, reply.text
    text = reply.text
    payload = json.loads(text[text.index("{"):text.rindex("}") + 1])  # JSON, or the one SSE data line
    assert payload["error"]["code"] == -32602, payload
    assert expected in json.dumps(payload["error"]) and "Traceback" not in text


def test_tooldock_yaml_tasks_key_is_checked_and_kept_in_image_labels():
    from tooldock.namespace.config import ConfigError, config_to_dict, parse_config

    config = parse_config({"tasks": {"optional": ["report_*"], "required": ["rebuild"]}})
    assert config.tasks_optional == ("report_*",) and config.tasks_required == ("rebuild",)
    assert parse_config(config_to_dict(config)) == config  # the io.tooldock.config label round-trips
    assert parse_config({"tasks": ["a_*"]}).tasks_optional == ("a_*",)  # a list: optional
    for bad, says in (
        ({"tasks": "all"}, "'tasks' must be a mapping like {optional:"),
        ({"tasks": {"sometimes": ["x"]}}, "'tasks' must be a mapping"),
        ({"tasks": {"required": "x"}}, "'tasks.required' must be a list of tool-name globs"),
        ({"tasks": {"optional": [""]}}, "'tasks.optional' must be a list of tool-name globs"),
    ):
        with pytest.raises(ConfigError, match=re.escape(says)):
            parse_config(bad)


def listen_for(gateway, filter_: dict[str, Any], until: Any, timeout: float = 20) -> list[dict[str, Any]]:
    """Open a 2026-07-28 `subscriptions/listen` stream over raw HTTP; the messages until `until(message)`."""
    import httpx

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
    }
    body = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
            "params": {"notifications": filter_, "_meta": meta}}
    headers = {**gateway.headers("jobs"), "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    with httpx.stream("POST", gateway.url + "/mcp", json=body, headers=headers, timeout=timeout) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line.startswith("data:") and line[5:].strip():
                seen.append(json.loads(line[5:]))
                if until(seen[-1]):
                    break
            assert time.monotonic() < deadline, seen
    return seen


def test_status_notifications_ride_a_listen_stream_that_names_the_task(gateway):
    async def start(s: Session) -> str:
        return (await s.start("slow_compute", seconds=1.5, label="watched")).task_id

    task_id = run(gateway, start)
    seen = listen_for(gateway, {"taskIds": [task_id, "not-mine"], "toolsListChanged": True},
                      lambda m: m.get("params", {}).get("status") == "completed")
    ack, *updates = seen
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"toolsListChanged": True, "taskIds": [task_id, "not-mine"]}
    assert [u["method"] for u in updates] == ["notifications/tasks"] * len(updates)
    assert updates[0]["params"]["status"] == "working" and updates[0]["params"]["taskId"] == task_id
    done = updates[-1]["params"]
    assert done["result"]["content"][0]["text"] == "computed watched after 1.5s"
    assert done["_meta"]["io.modelcontextprotocol/subscriptionId"] == 9
    # Subscribing after the end still tells the final state (sent right after the acknowledgement).
    late = listen_for(gateway, {"taskIds": [task_id]}, lambda m: m["method"] == "notifications/tasks")
    assert late[-1]["params"]["status"] == "completed"


def test_fuzzed_task_requests_never_fail_the_gateway(gateway):
    """Hypothesis over the extension's surface (2026-07-28): tasks/get, tasks/update, tasks/cancel, tools/call of
    task tools, with odd params, capabilities and Mcp-Name headers: never a 5xx or a traceback, and the gateway
    serves afterwards."""
    import httpx
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=12),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=8,
    )
    params = st.fixed_dictionaries(
        {},
        optional={
            "taskId": values, "inputResponses": values, "name": st.sampled_from(["slow_compute", "failing_job", "x"]),
            "arguments": st.dictionaries(st.sampled_from(["seconds", "label"]), values, max_size=2),
        },
    )
    caps = st.sampled_from([{}, {"extensions": {TASKS: {}}}, {"extensions": {TASKS: "x"}}, {"extensions": []}])
    method = st.sampled_from(["tasks/get", "tasks/update", "tasks/cancel", "tasks/list", "tools/call"])
    client = httpx.Client(timeout=30)

    @settings(max_examples=int(os.environ.get("TOOLDOCK_TASK_FUZZ_EXAMPLES", "300")), deadline=None,
              database=None, suppress_health_check=list(HealthCheck))
    @given(method=method, params=params, caps=caps, name=st.none() | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=8))
    def probe(method, params, caps, name):
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": caps}
        if method == "tools/call" and "arguments" in params:
            params["arguments"]["seconds"] = 0  # never leave long tasks behind
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        headers = {**gateway.headers("jobs"), "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        if name is not None:
            headers["Mcp-Name"] = name
        reply = client.post(gateway.url + "/mcp", json=body, headers=headers)
        assert reply.status_code < 500 and "Traceback" not in reply.text, (body, reply.status_code, reply.text)

    try:
        probe()
    finally:
        client.close()
    assert gateway.call("jobs", "greet", name="still here").json() == {"result": "Hello, still here!"}


def test_a_context_tools_progress_is_the_tasks_status_message(gateway):
    """A Context tool that only reports progress never asks its client anything: its task is announced at
    once (a tool that may ask first gets a second to do so), so the caller sees every step from the first."""
    async def body(s: Session) -> Any:
        created = await s.start("progress_job", steps=5)
        messages = []
        while (found := await s.get(created.task_id)).status == "working":
            if found.status_message and found.status_message not in messages:
                messages.append(found.status_message)
            await asyncio.sleep(0.1)
        return messages, found

    messages, done = run(gateway, body)
    assert done.status == "completed" and done.result["content"][0]["text"] == "5 steps"
    assert messages and set(messages) <= {f"{n}/5 step {n}" for n in range(1, 6)}, messages
    assert messages[0] in ("1/5 step 1", "2/5 step 2"), messages  # a second's wait would start at step 3


def test_which_context_tools_may_ask_their_client_is_read_from_their_source():
    from fastmcp import Context

    from tooldock.namespace.asks import may_ask

    # Never called: only their source is read (so `helper`, `get_context` and `InputRequiredResult` need not exist).
    async def reports(ctx: Context, n: int) -> int:
        await ctx.info("start")
        await ctx.report_progress(1, n)
        return len(await ctx.read_resource("data://x")) + len(ctx.request_id)

    async def elicits(ctx: Context) -> str:
        return str(await ctx.elicit("Sure?", response_type=bool))

    async def hands_it_on(ctx: Context) -> str:
        return await helper(ctx)

    async def guards(context: Context) -> Any:
        return context.input_responses or InputRequiredResult(input_requests={})

    async def fetches_it(x: int) -> str:
        return str(await get_context().sample("hi"))

    async def stores_it(ctx: Context) -> None:
        kept = ctx
        await kept.sample("hi")

    assert may_ask(reports, "ctx") is False
    for fn, name in [(elicits, "ctx"), (hands_it_on, "ctx"), (guards, "context"), (fetches_it, "x"),
                     (stores_it, "ctx")]:
        assert may_ask(fn, name) is True, fn.__name__
    assert may_ask(eval("lambda ctx: ctx.info('x')"), "ctx") is True  # no source to read: it may


def test_a_task_over_the_rate_limit_is_refused_at_tools_call(make_gateway, tmp_path):
    """`limits.rate` counts a task when it is asked for, as a plain call: the one over the limit gets the
    plain call's rate_limited error result at once instead of a task that fails later, and the admitted
    task is not counted a second time when it runs."""
    tools = tmp_path / "src"
    shutil.copytree(FIXTURE, tools, ignore=shutil.ignore_patterns("__pycache__"))
    config = tools / "jobs" / "tooldock.yaml"
    config.write_text(config.read_text().replace("timeout: 30", "timeout: 30\n  rate: 0.1\n  burst: 1"))
    gw = make_gateway(tools, env={"TOOLDOCK_LOG_DIR": str(tmp_path / "audit")})
    gw.audit_dir = tmp_path / "audit"

    async def body(s: Session) -> Any:
        first = await s.start("slow_compute", seconds=0.2, label="admitted")
        second = await s.client.session.call_tool("slow_compute", {"seconds": 0.2, "label": "over"},
                                                  allow_claimed=True)
        return first, second, await s.until(first.task_id, timeout=15)

    first, second, done = run(gw, body)
    assert isinstance(first, CreatedTask) and done.status == "completed", done
    assert isinstance(second, types.CallToolResult) and second.is_error, second
    assert second.structured_content["error"]["code"] == "rate_limited"
    gw.wait_for(lambda: len(audit(gw, "slow_compute")) >= 2, 10, "the audit lines")
    assert sorted(line["status"] for line in audit(gw, "slow_compute")) == ["ok", "rate_limited"]


def test_a_tool_of_an_upstream_namespace_runs_as_a_task_by_tooldock_yaml(make_gateway, tmp_path):
    """An upstream namespace (tools.toml) takes `tasks:` from its tooldock.yaml as a folder of tools does: the
    upstream call runs in the task, its progress is the status message, a cancel stops it, and a client
    without the extension is refused a `required` tool."""
    from test_upstream import DEMO, write_upstream

    folder = write_upstream(tmp_path / "src", "relayed", f"""active_toolsets = ["demo_add", "demo_slow"]
[[servers]]
namespace = "demo"
command = "{DEMO}"
""")
    (folder / "tooldock.yaml").write_text('tasks:\n  required: ["demo_add"]\n  optional: ["demo_slow"]\n')
    gw = make_gateway(tmp_path / "src")
    gw.wait_for(lambda: gw.namespace("relayed")["servers"][0]["state"] == "ready", what="the upstream server")

    async def body(s: Session) -> Any:
        added = await s.start("demo_add", a=2, b=3)
        slept = await s.start("demo_slow", seconds=1)
        stopped = await s.start("demo_slow", seconds=30)
        await s.until(stopped.task_id, "working")
        await asyncio.sleep(0.5)
        await s.cancel(stopped.task_id)
        return [await s.until(t.task_id) for t in (added, slept, stopped)]

    added, slept, stopped = run(gw, body, namespace="relayed")
    assert added.status == "completed" and added.result["structuredContent"] == {"result": 5}, added
    assert slept.status == "completed" and slept.result["structuredContent"] == {"result": "slept 1.0"}, slept
    assert slept.status_message == "1/1 step 1"  # the upstream server's progress
    assert stopped.status == "cancelled", stopped
    gw.wait_for(lambda: "slow(30.0) cancelled" in gw.logs, 10, "the upstream server's call cancelled")

    async def without(s: Session) -> Any:
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError) as refused:
            await s.client.call_tool("demo_add", {"a": 1, "b": 1})
        return refused.value, await s.client.call_tool("demo_slow", {"seconds": 0})

    refused, plain = run(gw, without, namespace="relayed", extension=False)
    assert refused.error.code == -32021 and "runs only as a task" in refused.error.message
    assert plain.structured_content == {"result": "slept 0.0"}


VERSIONED_TASK = '''from fastmcp.tools import tool


@tool(name="calc", version=1, task=True)
async def calc_v1(x: int) -> int:
    """Version 1: returns x."""
    return x


@tool(name="calc", version=2, task=True)
async def calc_v2(x: int) -> int:
    """Version 2: doubles x."""
    return x * 2
'''


def test_a_task_runs_the_version_its_call_asked_for(make_gateway, tmp_path):
    """A versioned tool run as a task runs the version asked for (`_meta.fastmcp.version`), as a plain call
    does (test_mcp_like_fastmcp): the task's runner is handed it."""
    (tmp_path / "tools" / "jobs").mkdir(parents=True)
    (tmp_path / "tools" / "jobs" / "calc.py").write_text(VERSIONED_TASK)
    gateway = make_gateway(tmp_path / "tools")

    async def body(s: Session) -> list[Any]:
        done = []
        for version in ("1", "2"):
            created = await s.client.session.call_tool("calc", {"x": 3}, meta={"fastmcp": {"version": version}},
                                                       allow_claimed=True)
            assert isinstance(created, CreatedTask), created
            done.append(await s.until(created.task_id))
        return done

    first, second = run(gateway, body)
    assert first.status == second.status == "completed", (first, second)
    assert first.result["structuredContent"] == {"result": 3} and second.result["structuredContent"] == {"result": 6}
