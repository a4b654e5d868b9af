"""The lean path's streamed answers (issue 16): a `tools/call` of a Context tool is answered by the lean path
as one SSE stream. Checked with raw HTTP against the same gateway with the lean path off
(TOOLDOCK_LEAN_MCP=false): the same messages in the same order (progress, log lines at the session's level,
the tool's questions to the client, the response), the same headers and event shape (a priming event with
its `retry:`, event ids), the same refusals when the tool asks a client for what it did not declare, a
stream that resumes with `Last-Event-ID`, a call cancelled with `notifications/cancelled`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from test_mcp_lean import Session, cancel_midway

TOOLS = '''import asyncio

from fastmcp import Context
from fastmcp.tools import tool


@tool
async def steps(n: int, ctx: Context) -> int:
    """Report progress n times, logging at two levels on the way."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1}")
        await ctx.debug(f"debug {i}")
        await ctx.warning({"step": i})
    return n


@tool
async def slow(ctx: Context) -> str:
    """Report once, then wait a long time."""
    await ctx.report_progress(1)
    await asyncio.sleep(30)
    return "late"


@tool
async def broken(ctx: Context) -> str:
    """Fail after one progress report."""
    await ctx.report_progress(1, 2)
    raise ValueError("half way")
'''
ASKING = Path(__file__).parent / "fixtures" / "input"


class Stream(Session):
    """A raw 2025-11-25 session whose answers are read as SSE events: (id, parsed data) pairs."""

    def __init__(self, gateway, namespace: str, capabilities: dict | None = None) -> None:
        super().__init__(gateway, namespace, capabilities)
        self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/list"})  # the SDK's first list

    def call(self, tool: str, arguments: dict, token: str | None = "tok", rid: int | None = None):
        params: dict = {"name": tool, "arguments": arguments}
        if token is not None:
            params["_meta"] = {"progressToken": token}
        reply = self.post({"jsonrpc": "2.0", "id": rid or next(self.ids), "method": "tools/call", "params": params})
        return reply, events(reply.text)


def events(text: str) -> list[tuple[str | None, dict | None]]:
    found = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "") for line in block.split("\n") if line)
        if "data" in fields:
            found.append((fields.get("id"), json.loads(fields["data"]) if fields["data"] else None))
    return found


def messages(found) -> list[dict]:
    out = []
    for _, data in found:
        if data is not None:
            data = dict(data)
            data.pop("id", None)
            out.append(data)
    return out


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    (tmp_path / "src" / "streamy").mkdir(parents=True)
    (tmp_path / "src" / "streamy" / "tools.py").write_text(TOOLS)
    return tmp_path / "src"


def _head(reply: httpx.Response) -> dict:
    keep = ("content-type", "cache-control", "connection", "x-accel-buffering")
    return {k: reply.headers.get(k) for k in keep} | {"session": bool(reply.headers.get("mcp-session-id"))}


def test_streamed_context_calls_are_the_sdks(make_gateway, tools, tmp_path):
    lean = make_gateway(tools, ASKING, env={"TOOLDOCK_LOG_DIR": str(tmp_path / "audit")})
    sdk = make_gateway(tools, ASKING, env={"TOOLDOCK_LEAN_MCP": "false"})
    fast, slow = Stream(lean, "streamy"), Stream(sdk, "streamy")
    for session in (fast, slow):  # log lines at warning and above only
        session.post({"jsonrpc": "2.0", "id": 99, "method": "logging/setLevel", "params": {"level": "warning"}})
    for tool, arguments, token in (("steps", {"n": 3}, "tok"), ("steps", {"n": 2}, None), ("broken", {}, 7),
                                   ("steps", {"n": "three"}, "tok")):
        (got, mine), (want, theirs) = fast.call(tool, arguments, token), slow.call(tool, arguments, token)
        assert got.status_code == want.status_code == 200 and _head(got) == _head(want)
        assert mine[0] == (mine[0][0], None) and mine[0][0] and theirs[0][1] is None  # the priming event
        assert "retry: " in got.text and all(event_id for event_id, _ in mine)
        ours, expected = messages(mine), messages(theirs)
        if "error" not in json.dumps(expected[-1]) and not expected[-1]["result"].get("isError"):
            assert ours == expected, (tool, arguments)
        else:  # a failed call: the same shape; argument errors are worded by whoever validated them
            assert ours[:-1] == expected[:-1] and ours[-1]["result"]["isError"] == expected[-1]["result"]["isError"]
        if arguments == {"n": 3}:
            assert [m.get("method") for m in ours].count("notifications/progress") == 3
            assert [m["params"]["level"] for m in ours if m.get("method") == "notifications/message"] == ["warning"] * 3

    # asking a client that declared nothing: refused the same way (an imperative ask, a guard's round)
    ask_fast, ask_slow = Stream(lean, "asking"), Stream(sdk, "asking")
    for tool, arguments in (("trip", {"city": "Paris"}), ("survey", {})):
        ours, expected = messages(ask_fast.call(tool, arguments)[1]), messages(ask_slow.call(tool, arguments)[1])
        assert ours == expected, tool

    # the audit log has the streamed calls like any other
    deadline, lines = time.monotonic() + 10, []
    while time.monotonic() < deadline and len([l for l in lines if l.get("tool") == "steps"]) < 3:
        time.sleep(0.1)
        lines = [json.loads(l) for f in (tmp_path / "audit").glob("*.jsonl") for l in f.read_text().splitlines()]
    steps = [l for l in lines if l.get("tool") == "steps"]
    assert len(steps) == 3 and all(l["front_end"] == "mcp" and l["protocol"] == "2025-11-25" for l in steps)
    assert [l["status"] for l in steps].count("ok") == 2  # and the one with bad arguments failed


def test_a_streamed_call_resumes_with_last_event_id(make_gateway, tools):
    gateway = make_gateway(tools)
    session = Stream(gateway, "streamy")
    reply, found = session.call("steps", {"n": 2})
    assert reply.headers["content-type"].startswith("text/event-stream")
    priming, first = found[0][0], found[1][0]
    for after, expected in ((priming, found[1:]), (first, found[2:])):
        text = ""  # the replay stays open for what comes later (the SDK's GET): read up to the response
        with session.http.stream("GET", session.url, headers={"Last-Event-ID": after}) as again:
            assert again.status_code == 200
            for line in again.iter_lines():
                text += line + "\n"
                if line.startswith("data: ") and '"result"' in line:
                    break
        assert [(i, d) for i, d in events(text + "\n") if d is not None] == expected


def test_a_streamed_call_is_cancelled_by_notifications_cancelled(make_gateway, tools):
    gateway = make_gateway(tools)
    session = Stream(gateway, "streamy")
    answer = cancel_midway(session, 500, lambda: session.call("slow", {}, rid=500)[1], 1.5)
    assert messages(answer) == [
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "tok", "progress": 1.0}},
        {"jsonrpc": "2.0", "error": {"code": -32800, "message": "Request cancelled"}},
    ]
    assert messages(session.call("steps", {"n": 1}, token=None)[1])[-1]["result"]["structuredContent"] == {"result": 1}


def _answer_of(request: dict) -> dict:
    """The client's side of a question: a user, an LLM, a file system."""
    if request["method"] == "elicitation/create":
        schema = request["params"].get("requestedSchema") or {}
        field = next(iter(schema.get("properties") or {"value": None}))
        value = {"colour": "green"}.get(field, "Ada")
        return {"action": "accept", "content": {field: value}}
    if request["method"] == "sampling/createMessage":
        return {"role": "assistant", "content": {"type": "text", "text": "the old bridge"}, "model": "test-llm"}
    return {"roots": [{"uri": "file:///home/ada/trips", "name": "trips"}]}


def converse(session: Stream, tool: str, arguments: dict) -> list[dict]:
    """Call `tool`, answering each question the stream carries (POSTed back on another connection); the
    stream's messages without their ids."""
    body = {"jsonrpc": "2.0", "id": next(session.ids), "method": "tools/call", "params": {"name": tool,
                                                                                        "arguments": arguments}}
    seen = []
    with session.http.stream("POST", session.url, content=json.dumps(body),
                             headers={"Content-Type": "application/json"}) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        for line in reply.iter_lines():
            if not line.startswith("data: ") or not line[6:].strip():
                continue
            message = json.loads(line[6:])
            if "method" in message and "id" in message:  # a question: answer it
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": _answer_of(message)}
                assert session.post(answer).status_code == 202
            message.pop("id", None)
            seen.append(message)
            if "result" in message or "error" in message:
                break
    return seen


def test_questions_to_the_client_go_on_the_stream(make_gateway, tools):
    """A client that declared sampling, elicitation and roots: the tool's questions reach it on the call's
    stream and its answers (POSTed back) reach the tool; a guard's rounds are asked the same way. As the SDK."""
    lean = make_gateway(tools, ASKING)
    sdk = make_gateway(tools, ASKING, env={"TOOLDOCK_LEAN_MCP": "false"})
    everything = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": False}}
    fast, slow = Stream(lean, "asking", everything), Stream(sdk, "asking", everything)
    for tool, arguments in (("trip", {"city": "Oslo"}), ("survey", {})):
        ours, expected = converse(fast, tool, arguments), converse(slow, tool, arguments)
        assert ours == expected, tool
    assert ours[-1]["result"]["structuredContent"] == {"result": "Ada likes green"}
    assert [m["method"] for m in converse(fast, "trip", {"city": "Oslo"})[:-1]] == [
        "elicitation/create", "sampling/createMessage", "roots/list"]

    # a client that answers with an error: the tool is told, as through the SDK
    body = {"jsonrpc": "2.0", "id": 4242, "method": "tools/call", "params": {"name": "trip", "arguments": {"city": "Rome"}}}
    with fast.http.stream("POST", fast.url, content=json.dumps(body), headers={"Content-Type": "application/json"}) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: ") and "elicitation/create" in line:
                asked = json.loads(line[6:])
                refusal = {"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -1, "message": "user said no"}}
                assert fast.post(refusal).status_code == 202
            elif line.startswith("data: ") and '"id":4242' in line:
                assert "user said no" in line
                break
