"""Workers die, crash-loop, fail to install: the call fails cleanly, the worker comes back, and the
other namespaces keep serving throughout."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time

from conftest import EXAMPLES, FIXTURES


def test_sigkill_mid_call_fails_cleanly_and_the_worker_comes_back(make_gateway):
    gw = make_gateway(FIXTURES / "tools", env={"TOOLDOCK_RESTART_BACKOFF": "0.2"})
    before = gw.namespace("testing")
    assert before["state"] == "ready" and before["restarts"] == 0
    replies = []
    caller = threading.Thread(target=lambda: replies.append(gw.call("testing", "slow", seconds=10)))
    caller.start()
    gw.wait_for(lambda: gw.namespace("testing")["inflight"] == 1, what="the call to be in flight")
    os.kill(before["pid"], signal.SIGKILL)
    caller.join(30)
    (reply,) = replies
    assert reply.status_code == 500
    error = reply.json()["error"]
    assert error["code"] == "internal_error" and "exited during the call" in error["message"]
    gw.wait_for(lambda: gw.namespace("testing")["state"] == "ready", what="the worker to come back")
    after = gw.namespace("testing")
    assert after["restarts"] == 1 and after["pid"] != before["pid"]
    assert gw.call("testing", "pid").json()["result"] == after["pid"]
    assert gw.get("/health").json()["status"] == "ok"


def test_crash_loop_is_reported_and_others_keep_serving(make_gateway):
    gw = make_gateway(FIXTURES / "crashy", EXAMPLES, env={"TOOLDOCK_RESTART_BACKOFF": "0.05"})
    crashy = gw.namespace("crashy")
    assert crashy["state"] == "crash_loop"
    assert "exited with code 3" in crashy["last_error"]
    health = gw.get("/health").json()
    assert health["status"] == "degraded" and health["unhealthy"] == {"crashy": "crash_loop"}
    assert gw.call("multi-tool", "add", a=1, b=2).json() == {"result": 3}
    reply = gw.call("crashy", "never", x=1)
    # the worker never listed its tools: not "no such tool" (404) but "not running", retryable (503)
    assert reply.status_code == 503 and reply.headers["Retry-After"] == "1"
    assert reply.json()["error"]["code"] == "namespace_unavailable"
    assert "is not running (crash_loop): " in reply.json()["error"]["message"] and "exited with code 3" in reply.text
    assert gw.get("/tools", "crashy").json()["tools"] == []


def test_unresolvable_requirement_fails_that_namespace_only(make_gateway, tmp_path):
    folder = tmp_path / "src" / "needs-missing"
    folder.mkdir(parents=True)
    (folder / "t.py").write_text((FIXTURES / "tools" / "broken-file" / "good.py").read_text())
    (folder / "requirements.txt").write_text("tooldock-no-such-package-xyz==1.0\n")
    gw = make_gateway(tmp_path / "src", EXAMPLES)
    ns = gw.namespace("needs-missing")
    assert ns["state"] == "failed"
    assert "tooldock-no-such-package-xyz" in ns["last_error"] and "requirements.txt" in ns["last_error"]
    assert gw.call("basic-tool", "say_hello").status_code == 200
    assert gw.get("/health").json()["unhealthy"] == {"needs-missing": "failed"}
    refused = gw.call("needs-missing", "still_works")
    assert refused.status_code == 503 and "tooldock-no-such-package-xyz" in refused.json()["error"]["message"]
    # said once at start-up, in the start-up lines (not also by the worker's supervisor)
    assert gw.logs.count("cannot install the dependencies of namespace 'needs-missing'") == 1, gw.logs


def test_a_requirement_that_breaks_a_serving_namespace_keeps_its_previous_version(make_gateway, tmp_path):
    """An edit of requirements.txt that does not install is a failed reload, said as such: the version
    before it keeps serving, and the reload's answer (and line) says so, once."""
    folder = tmp_path / "src" / "deps"
    folder.mkdir(parents=True)
    (folder / "t.py").write_text((FIXTURES / "tools" / "broken-file" / "good.py").read_text())
    gw = make_gateway(tmp_path / "src", env={"MANAGER_INTERNAL_TOKEN": "manager-token-for-tests"})
    assert gw.namespace("deps")["state"] == "ready"
    (gw.tools_dir / "deps" / "requirements.txt").write_text("tooldock-no-such-package-xyz==1.0\n")
    body = gw.post("/reload", headers={"X-Manager-Token": "manager-token-for-tests"}).json()
    reason = body["failed"]["deps"]
    assert "tooldock-no-such-package-xyz" in reason and reason.endswith("; the previous version keeps serving")
    ns = gw.namespace("deps")
    assert ns["state"] == "ready" and ns["reload_error"] == reason
    assert gw.call("deps", "still_works", x=2).json() == {"result": 4}
    assert "cannot install the dependencies" not in gw.logs  # the answer said it; the log has no copy of its own


def test_generated_token_is_printed_once_and_works(make_gateway):
    gw = make_gateway(EXAMPLES / ".." / "examples", env={"TOOLDOCK_BEARER_TOKEN": ""}, start=False)
    gw.env.pop("TOOLDOCK_BEARER_TOKEN")
    gw.start()
    lines = gw.logs.splitlines()
    index = next(i for i, line in enumerate(lines) if "bearer token is:" in line)
    gw.token = lines[index + 1].strip()
    assert len(gw.token) >= 32 and gw.logs.count(gw.token) == 1
    assert gw.call("basic-tool", "say_hello").status_code == 200
    gw.token = "wrong-token-123"
    assert gw.call("basic-tool", "say_hello").status_code == 401


def test_idle_worker_sleeps_and_wakes_on_the_next_call(make_gateway, tmp_path):
    """Scale to zero: `idle_timeout` stops an unused worker; its tools stay listed; the next call starts it."""
    folder = tmp_path / "src" / "sleepy"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "tools" / "broken-file" / "good.py", folder / "good.py")
    (folder / "tooldock.yaml").write_text("idle_timeout: 1\n")
    gw = make_gateway(tmp_path / "src")
    first = gw.namespace("sleepy")
    assert gw.call("sleepy", "still_works", x=1).json() == {"result": 2}
    gw.wait_for(lambda: gw.namespace("sleepy")["state"] == "sleeping", what="the worker to go to sleep")

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True

    gw.wait_for(lambda: gone(first["pid"]), timeout=10, what="the worker process to exit")
    assert [t["name"] for t in gw.get("/tools", "sleepy").json()["tools"]] == ["still_works"]
    assert gw.get("/health").json()["status"] == "ok"
    assert gw.call("sleepy", "still_works", x=4).json() == {"result": 8}
    woken = gw.namespace("sleepy")
    assert woken["state"] == "ready" and woken["restarts"] == 0 and woken["last_wake_ms"] > 0


BIG = '''from fastmcp.tools import tool
import asyncio


@tool
def big(n: int) -> str:
    """Return n characters."""
    return "x" * n


@tool
async def nap(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return "rested"
'''


def test_a_result_too_large_to_send_fails_its_call_alone(make_gateway, tmp_path):
    """A result over the protocol's 16 MiB line used to end the worker's connection: every call in flight
    failed with "exited during the call; retry", and retrying failed the same way."""
    (tmp_path / "src" / "huge").mkdir(parents=True)
    (tmp_path / "src" / "huge" / "big.py").write_text(BIG)
    gw = make_gateway(tmp_path / "src")
    pid = gw.namespace("huge")["pid"]
    napping: dict = {}
    bystander = threading.Thread(target=lambda: napping.update(gw.call("huge", "nap", seconds=2).json()))
    bystander.start()
    answer = gw.call("huge", "big", n=20_000_000)
    bystander.join()
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["code"] == "internal_error" and "more than the 16 MiB one result may be: return less" in error["message"]
    assert napping == {"result": "rested"}  # the call beside it finished
    assert gw.namespace("huge")["pid"] == pid and gw.namespace("huge")["restarts"] == 0
    assert gw.call("huge", "big", n=3).json() == {"result": "xxx"}


STUCK_TOOLS = '''import asyncio
import os
import time

from fastmcp.tools import tool


@tool
def spin(seconds: float) -> str:
    """Keep a CPU busy for a while (Python cannot stop this thread)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


@tool
async def freeze(seconds: float) -> str:
    """A mistake: blocking code in an async tool stops the worker's event loop."""
    time.sleep(seconds)
    return "thawed"


@tool
async def block_later(seconds: float) -> str:
    """A mistake with no call to show for it: blocking code in a background callback, after the answer."""
    asyncio.get_running_loop().call_later(0.2, time.sleep, seconds)
    return "scheduled"


@tool
def pid() -> int:
    """The worker's process id."""
    return os.getpid()
'''


def _stuck_gateway(make_gateway, tmp_path, **env):
    folder = tmp_path / "src" / "stuck"
    folder.mkdir(parents=True)
    (folder / "t.py").write_text(STUCK_TOOLS)
    return make_gateway(tmp_path / "src", env={"TOOL_CALL_TIMEOUT_SECONDS": "1", **env})


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (exited, not yet reaped by its parent) is gone too
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_worker_stuck_in_a_timed_out_sync_tool_is_replaced_without_dropping_calls(make_gateway, tmp_path):
    """A sync tool that outlives its time limit keeps its thread (and a CPU) for as long as it runs: the
    gateway replaces the worker `TOOLDOCK_STUCK_AFTER` seconds later, hot (the calls around it all succeed),
    and the old process, with the runaway thread, ends."""
    gw = _stuck_gateway(make_gateway, tmp_path, TOOLDOCK_STUCK_AFTER="1")
    before = gw.namespace("stuck")["pid"]
    timed_out = gw.call("stuck", "spin", seconds=3600)
    assert timed_out.status_code == 504 and timed_out.json()["error"]["code"] == "execution_timeout"
    answers: list[int] = []
    while gw.namespace("stuck")["pid"] == before and len(answers) < 400:  # calls go on through the swap
        reply = gw.call("stuck", "pid")
        assert reply.status_code == 200, reply.text
        answers.append(reply.json()["result"])
        time.sleep(0.02)
    after = gw.namespace("stuck")
    assert after["pid"] != before and after["state"] == "ready" and after["restarts"] == 1
    assert after["last_error"].startswith("replaced: 'spin' still runs") and "sync tool" in after["last_error"]
    assert before in answers and gw.call("stuck", "pid").json()["result"] == after["pid"]
    gw.wait_for(lambda: _gone(before), timeout=20, what="the stuck worker to end")
    assert "[stuck] the worker is stuck: 'spin' still runs" in gw.logs


def test_a_worker_whose_event_loop_is_blocked_is_replaced(make_gateway, tmp_path):
    """An async tool that blocks the loop stops every call of the namespace: the ping after its timeout goes
    unanswered, and a fresh worker serves again within seconds instead of after the hour it blocks."""
    gw = _stuck_gateway(make_gateway, tmp_path, TOOLDOCK_STUCK_AFTER="0.5")
    before = gw.namespace("stuck")["pid"]
    assert gw.call("stuck", "freeze", seconds=3600).status_code == 504
    gw.wait_for(lambda: gw.namespace("stuck")["pid"] != before, timeout=20, what="a fresh worker")
    assert gw.call("stuck", "pid").json() == {"result": gw.namespace("stuck")["pid"]}
    assert "blocks its event loop" in gw.namespace("stuck")["last_error"]
    assert gw.get("/health").json()["status"] == "ok"


def test_an_idle_worker_whose_event_loop_is_blocked_is_found_by_the_liveness_ping(make_gateway, tmp_path):
    """No call is in flight and none was cancelled, yet the worker cannot answer (a background callback
    blocks its loop): the liveness ping finds it and a fresh worker serves before any caller waits on it."""
    gw = _stuck_gateway(make_gateway, tmp_path, TOOLDOCK_LIVENESS_INTERVAL="1")
    before = gw.namespace("stuck")["pid"]
    assert gw.call("stuck", "block_later", seconds=3600).json() == {"result": "scheduled"}
    gw.wait_for(lambda: gw.namespace("stuck")["pid"] != before, timeout=20, what="a fresh worker")
    after = gw.namespace("stuck")
    assert after["state"] == "ready" and after["restarts"] == 1
    assert after["last_error"].startswith("replaced: it did not answer a liveness ping within 3s with no call")
    assert gw.call("stuck", "pid").json() == {"result": after["pid"]}
    gw.wait_for(lambda: _gone(before), timeout=20, what="the blocked worker to end")


def test_a_short_block_or_liveness_off_keeps_the_worker(make_gateway, tmp_path):
    """A loop blocked for less than the ping's 3 s answers late, not never: the worker stays. With
    TOOLDOCK_LIVENESS_INTERVAL=off an idle blocked worker is left alone (as before the ping)."""
    gw = _stuck_gateway(make_gateway, tmp_path, TOOLDOCK_LIVENESS_INTERVAL="0.5")
    before = gw.namespace("stuck")["pid"]
    assert gw.call("stuck", "block_later", seconds=1.5).status_code == 200
    time.sleep(3)
    assert gw.namespace("stuck")["pid"] == before and gw.namespace("stuck")["restarts"] == 0
    off = _stuck_gateway(make_gateway, tmp_path / "off", TOOLDOCK_LIVENESS_INTERVAL="off")
    pid = off.namespace("stuck")["pid"]
    assert off.call("stuck", "block_later", seconds=6).status_code == 200
    time.sleep(5)
    assert off.namespace("stuck")["pid"] == pid and "liveness ping" not in off.logs


def test_a_timed_out_call_that_ends_soon_after_keeps_its_worker(make_gateway, tmp_path):
    """A thread that returns within `TOOLDOCK_STUCK_AFTER` of its cancel leaves the worker alone."""
    gw = _stuck_gateway(make_gateway, tmp_path, TOOLDOCK_STUCK_AFTER="2")
    before = gw.namespace("stuck")["pid"]
    assert gw.call("stuck", "spin", seconds=1.8).status_code == 504
    time.sleep(3.5)  # the check at 3 s (timeout + 2) finds nothing running
    now = gw.namespace("stuck")
    assert now["pid"] == before and now["restarts"] == 0 and now["last_error"] is None
    assert "is stuck" not in gw.logs


def test_a_tool_calling_sys_exit_fails_its_call_and_the_worker_serves_on(make_gateway):
    """sys.exit() in a tool (argparse on bad arguments, a CLI's main() wrapped as a tool) is the call's
    failure, said as such, in sync, async and Context tools: the worker keeps serving, no restart."""
    gw = make_gateway(FIXTURES / "exits")
    worker = gw.namespace("exits")["pid"]
    for tool in ("sync_exit", "async_exit", "context_exit"):
        reply = gw.call("exits", tool, code=4)
        assert reply.status_code == 500, reply.text
        assert reply.json()["error"]["message"] == (
            "the tool called sys.exit(4); a tool reports a failure by raising an exception")
    parsed = gw.call("exits", "parse", args="--x 1")
    assert "the tool called sys.exit(2)" in parsed.json()["error"]["message"]
    assert "the following arguments are required: --n" in gw.logs  # argparse's own message, in the log
    assert gw.call("exits", "parse", args="--n 5").json() == {"result": 5}
    after = gw.namespace("exits")
    assert after["pid"] == worker and after["restarts"] == 0 and after["state"] == "ready"
    assert gw.call("exits", "pid").json() == {"result": worker}


def test_a_worker_that_ends_without_a_word_is_reported_by_its_exit_code(make_gateway):
    """os._exit() cannot be caught: the worker is restarted, and the reason says how it ended (not its
    own "worker ready" line, the last it wrote)."""
    gw = make_gateway(FIXTURES / "exits", env={"TOOLDOCK_RESTART_BACKOFF": "0.05"})
    reply = gw.call("exits", "hard_exit")
    assert reply.status_code == 500 and "exited during the call" in reply.json()["error"]["message"]
    gw.wait_for(lambda: gw.namespace("exits")["restarts"] == 1, what="the restart")
    reason = gw.namespace("exits")["last_error"]
    assert reason == "worker exited unexpectedly (exit code 7): no output", reason


def test_a_context_tool_given_bad_arguments_is_refused_as_a_plain_tool_is(make_gateway):
    gw = make_gateway(FIXTURES / "exits")
    for tool in ("sync_exit", "context_exit"):
        reply = gw.call("exits", tool, code="four")
        assert reply.status_code == 422, reply.text
        error = reply.json()["error"]
        assert error["code"] == "invalid_arguments", error
        assert error["message"].startswith("argument 'code': Input should be a valid integer"), error
        assert error["message"].endswith("(got 'four')") and "pydantic.dev" not in error["message"], error
