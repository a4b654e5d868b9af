"""MCP tasks (the 2026-07-28 tasks extension) shared by gateway replicas on one real Redis (issue 56): a task
created on one replica is read, cancelled, answered and listened to on another (no sticky routing: each raw
HTTP request names the replica it goes to), a task whose replica is SIGKILLed is failed by the survivor within
the lease's bound, and a lost Redis makes task requests a quick retryable JSON-RPC error.

The namespace is tests/fixtures/tasks/jobs (as tests/test_tasks.py)."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Gateway
from rediskit import RedisServer

pytestmark = pytest.mark.slow
FIXTURE = Path(__file__).parent / "fixtures" / "tasks"
TASKS = "io.modelcontextprotocol/tasks"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}, "elicitation": {}},
}


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tasktools")
    shutil.copytree(FIXTURE, tmp / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp / "tools"


def _gateway(tools: Path, folder: Path, name: str, redis: RedisServer) -> Gateway:
    env = {"TOOLDOCK_STATE_URL": redis.url, "TOOLDOCK_LOG_DIR": str(folder / f"{name}-audit")}
    gateway = Gateway(tools, folder / f"{name}.log", env).start()
    gateway.audit_dir = folder / f"{name}-audit"  # type: ignore[attr-defined]
    return gateway


@pytest.fixture(scope="module")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, redis: RedisServer, tools: Path
) -> Iterator[tuple[Gateway, Gateway]]:
    folder = tmp_path_factory.mktemp("replicas")
    first = _gateway(tools, folder, "a", redis)
    second = _gateway(tools, folder, "b", redis)
    yield first, second
    first.stop()
    second.stop()


def rpc(gateway: Gateway, method: str, params: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    """One raw 2026-07-28 request (no session: any replica may get it); the JSON-RPC answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    headers = {**gateway.headers("jobs"), "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": method}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    reply = httpx.post(gateway.url + "/mcp", json=body, headers=headers, timeout=30)
    assert reply.status_code < 500 and "Traceback" not in reply.text, (reply.status_code, reply.text)
    text = reply.text
    if text.lstrip().startswith("{"):
        return json.loads(text)
    lines = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return next(m for m in lines if "id" in m and ("result" in m or "error" in m))


def start(gateway: Gateway, tool: str, **arguments: Any) -> str:
    answer = rpc(gateway, "tools/call", {"name": tool, "arguments": arguments})
    assert answer.get("result", {}).get("resultType") == "task", answer
    return str(answer["result"]["taskId"])


def get(gateway: Gateway, task_id: str) -> dict[str, Any]:
    answer = rpc(gateway, "tasks/get", {"taskId": task_id})
    assert "result" in answer, answer
    return answer["result"]


def until(gateway: Gateway, task_id: str, *statuses: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (found := get(gateway, task_id))["status"] not in statuses:
        assert time.monotonic() < deadline, f"task still {found['status']} after {timeout}s: {found}"
        time.sleep(0.1)
    return found


def audit(gateway: Gateway, tool: str) -> list[dict[str, Any]]:
    folder: Path = gateway.audit_dir  # type: ignore[attr-defined]
    lines = [json.loads(line) for path in folder.glob("*.jsonl") for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("tool") == tool]


def listen(gateway: Gateway, task_ids: list[str], until_status: str, seen: list[dict[str, Any]],
           timeout: float = 40) -> None:
    """A raw `subscriptions/listen` stream for `task_ids`: its messages go to `seen` until a task notification
    says `until_status` (or the time is up)."""
    body = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": task_ids}, "_meta": META}}
    headers = {**gateway.headers("jobs"), "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
    deadline = time.monotonic() + timeout
    with httpx.stream("POST", gateway.url + "/mcp", json=body, headers=headers, timeout=timeout) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line.startswith("data:") and line[5:].strip():
                seen.append(json.loads(line[5:]))
                if seen[-1].get("params", {}).get("status") == until_status:
                    return
            if time.monotonic() > deadline:
                return


# --- tests ------------------------------------------------------------------------------------------------


def test_a_task_created_on_one_replica_is_read_on_the_other(replicas):
    first, second = replicas
    task_id = start(first, "slow_compute", seconds=2, label="shared")
    right_after = get(second, task_id)  # in the store before the CreateTaskResult was answered
    assert right_after["status"] == "working" and right_after["taskId"] == task_id, right_after
    assert "result" not in right_after
    done = until(second, task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "computed shared after 2s"
    assert done["result"]["structuredContent"] == {"result": "computed shared after 2s"}
    assert get(first, task_id) == done  # the running replica (from memory) and the other agree
    unknown = rpc(second, "tasks/get", {"taskId": "no-such-task"})
    assert unknown["error"]["code"] == -32602 and "unknown task 'no-such-task'" in unknown["error"]["message"]


def test_a_task_belongs_to_its_key_on_every_replica(replicas):
    from tooldock.keys import KeyStore

    first, second = replicas
    _, key = KeyStore.from_env().create("task-owner", "write", ("jobs",))
    _, other = KeyStore.from_env().create("task-stranger", "write", ("jobs",))
    task_id = str(rpc(first, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 1}}, key)
                  ["result"]["taskId"])
    mine = rpc(second, "tasks/get", {"taskId": task_id}, key)
    assert mine["result"]["taskId"] == task_id, mine
    for method, params in (("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {}})):
        for token in (other, None):  # another key; the bearer token (not the task's owner either)
            refused = rpc(second, method, {"taskId": task_id, **params}, token)
            assert refused["error"]["code"] == -32602 and "unknown task" in refused["error"]["message"], refused


def test_cancel_on_another_replica_stops_the_task_where_it_runs(replicas):
    first, second = replicas
    task_id = start(first, "slow_compute", seconds=60, label="long")
    assert get(second, task_id)["status"] == "working"
    time.sleep(0.5)
    started = time.monotonic()
    ack = rpc(second, "tasks/cancel", {"taskId": task_id})
    assert ack["result"]["resultType"] == "complete", ack
    assert time.monotonic() - started < 5
    assert get(second, task_id)["status"] == "cancelled"  # written before the ack
    assert get(first, task_id)["status"] == "cancelled"
    assert rpc(second, "tasks/cancel", {"taskId": task_id})["result"]["resultType"] == "complete"  # idempotent
    # The tool's call on the first replica was stopped, not left running: its audit log says so.
    first.wait_for(lambda: any(line["status"] == "cancelled" for line in audit(first, "slow_compute")),
                   timeout=15, what="the cancelled call in the first replica's audit log")


def test_an_update_on_another_replica_answers_a_task_parked_where_it_runs(replicas):
    first, second = replicas
    task_id = start(first, "confirm_delete", filename="shared.txt")
    parked = until(second, task_id, "input_required")
    key, request = next(iter(parked["inputRequests"].items()))
    assert request["method"] == "elicitation/create" and request["params"]["message"] == "Delete shared.txt?"
    bad = rpc(second, "tasks/update", {"taskId": task_id, "inputResponses": {key: {"action": "maybe"}}})
    assert bad["error"]["code"] == -32602 and "is not a elicitation/create result" in bad["error"]["message"]
    answer = {key: {"action": "accept", "content": {"confirm": True}}}
    ack = rpc(second, "tasks/update", {"taskId": task_id, "inputResponses": answer})
    assert ack["result"]["resultType"] == "complete", ack
    done = until(second, task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "deleted shared.txt", done
    assert get(first, task_id)["status"] == "completed"


def test_a_listen_on_another_replica_hears_the_task_change(replicas):
    first, second = replicas
    task_id = start(first, "slow_compute", seconds=2.5, label="heard")
    seen: list[dict[str, Any]] = []
    listen(second, [task_id], "completed", seen)
    ack, *updates = seen
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    assert [u["method"] for u in updates] == ["notifications/tasks"] * len(updates), updates
    assert updates[0]["params"]["status"] == "working" and updates[0]["params"]["taskId"] == task_id
    done = updates[-1]["params"]  # heard from the first replica, on the task channel
    assert done["status"] == "completed", updates
    assert done["result"]["content"][0]["text"] == "computed heard after 2.5s"


def test_a_task_whose_replica_is_killed_fails_on_the_survivor_within_the_lease(
    replicas, redis, tools, tmp_path
):
    from tooldock.runtime.mcp.tasksharing import LEASE

    _, survivor = replicas
    doomed = _gateway(tools, tmp_path, "doomed", redis)
    try:
        task_id = start(doomed, "slow_compute", seconds=120, label="orphaned")
        assert get(survivor, task_id)["status"] == "working"
        seen: list[dict[str, Any]] = []  # a listen on the survivor hears the failure too
        listener = threading.Thread(target=listen, args=(survivor, [task_id], "failed", seen, LEASE + 30))
        listener.start()
        time.sleep(1.0)
        assert doomed.proc is not None
        doomed.proc.kill()
        doomed.proc.wait(10)
        killed = time.monotonic()
        failed = until(survivor, task_id, "failed", "completed", "cancelled", timeout=LEASE + 15)
        assert failed["status"] == "failed", failed
        assert time.monotonic() - killed < LEASE + 10
        assert "gateway replica running this task" in failed["statusMessage"]
        assert "stopped" in failed["error"]["message"] and failed["error"]["code"] == -32603, failed
        assert "inputRequests" not in failed and "result" not in failed
        first, _ = replicas
        assert get(first, task_id) == failed  # every replica says the same
        listener.join(LEASE + 30)
        assert seen and seen[-1].get("params", {}).get("status") == "failed", seen
    finally:
        doomed.stop()


def test_a_lost_redis_makes_task_requests_a_quick_retryable_error(replicas, redis):
    first, second = replicas
    done = start(first, "slow_compute", seconds=0, label="before")
    until(first, done, "completed")
    redis.stop()
    try:
        for gateway, method, params in (
            (first, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}),
            (second, "tasks/get", {"taskId": done}),  # not held by this replica: needs the store
            (second, "tasks/cancel", {"taskId": done}),
        ):
            started = time.monotonic()
            answer = rpc(gateway, method, params)
            assert time.monotonic() - started < 5, (method, time.monotonic() - started)
            error = answer.get("error")
            assert error is not None, (method, answer)
            assert error["data"]["code"] == "state_unavailable" and error["data"]["retryAfterSeconds"] == 1, error
        started = time.monotonic()  # a listen for a task another replica ran: its state is in the store
        body = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                "params": {"notifications": {"taskIds": [done]}, "_meta": META}}
        headers = {**second.headers("jobs"), "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
        refused = httpx.post(second.url + "/mcp", json=body, headers=headers, timeout=30)
        assert time.monotonic() - started < 5 and refused.status_code < 500, refused.text
        assert '"state_unavailable"' in refused.text and "Traceback" not in refused.text, refused.text
        assert get(first, done)["status"] == "completed"  # the running replica answers from its memory
    finally:
        redis.start()
    deadline = time.monotonic() + 20
    while "result" not in (answer := rpc(first, "tools/call", {"name": "slow_compute",
                                                               "arguments": {"seconds": 0, "label": "back"}})):
        assert time.monotonic() < deadline, answer  # recovered without a restart
        time.sleep(0.5)
    task_id = answer["result"]["taskId"]
    assert until(second, task_id, "completed")["result"]["content"][0]["text"] == "computed back after 0s"


def test_a_replica_that_cannot_renew_its_lease_fails_its_own_tasks(replicas, redis):
    """Redis lost for longer than the lease: the running replica gives its task up itself (failed, in the words
    another replica would use, its tool stopped), and writes that once Redis is back (an empty one here)."""
    from tooldock.runtime.mcp.tasksharing import LEASE, REFRESH

    first, second = replicas
    stopped = sum(line["status"] == "cancelled" for line in audit(first, "slow_compute"))
    task_id = start(first, "slow_compute", seconds=120, label="fenced")
    assert get(second, task_id)["status"] == "working"
    redis.stop()
    try:
        failed = until(first, task_id, "failed", "completed", "cancelled", timeout=LEASE + 2 * REFRESH + 10)
    finally:
        redis.start()
    assert failed["status"] == "failed" and "lease ran out" in failed["error"]["message"], failed
    assert "gateway replica running this task" in failed["statusMessage"]
    deadline = time.monotonic() + 2 * REFRESH + 15  # the empty Redis has it again at the next renewal
    while (seen := rpc(second, "tasks/get", {"taskId": task_id}).get("result", {})).get("status") != "failed":
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)
    assert seen["error"] == failed["error"]
    first.wait_for(lambda: sum(line["status"] == "cancelled" for line in audit(first, "slow_compute")) > stopped,
                   timeout=15, what="the given-up call stopped (cancelled in the audit log)")
