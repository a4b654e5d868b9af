"""Workers die, crash-loop, fail to install: the call fails cleanly, the worker comes back, and the
other namespaces keep serving throughout."""

from __future__ import annotations

import os
import shutil
import signal
import threading

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
