"""Forked workers (issue 16): on the process backend each environment gets one warm fork server and every
worker is its child, with its own session, environment and lifetime; killing the fork server loses nothing
for long; `TOOLDOCK_FORK_WORKERS=false` spawns workers as before; nothing is left behind at shutdown."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

pytestmark = pytest.mark.slow


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def cmdline(pid: int) -> str:
    """The process's command line. Right after `Popen` returns it can still read empty: the parent of a
    vfork resumes when the child's exec switches memory, before exec has written the new arguments."""
    deadline = time.monotonic() + 5
    while not (found := Path(f"/proc/{pid}/cmdline").read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found.replace(b"\0", b" ").decode(errors="replace")


def private_mb(pid: int) -> float:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    return sum(int(fields[k].split()[0]) for k in ("Private_Clean", "Private_Dirty")) / 1024


def worker_pid(gw, namespace: str) -> int:
    gw.wait_for(lambda: gw.namespace(namespace)["state"] == "ready", what=f"{namespace} to be ready")
    return int(gw.namespace(namespace)["pid"])


def test_workers_are_forked_from_one_warm_server_per_environment(make_gateway):
    gw = make_gateway(FIXTURES / "tools")
    pid = worker_pid(gw, "testing")
    server = parent_of(pid)
    assert "tooldock.worker.forkserver" in cmdline(server) and parent_of(server) == gw.proc.pid
    assert gw.call("testing", "pid").json()["result"] == pid
    # its own environment: the namespace's, never the gateway's token
    keys = gw.call("testing", "env_keys").json()["result"]
    assert "TOOLDOCK_BEARER_TOKEN" not in keys and "PATH" in keys
    # its own session (a Ctrl-C on the gateway's terminal does not reach it)
    assert os.getsid(pid) == pid


def test_a_crashed_forked_worker_is_restarted_and_the_fork_server_too(make_gateway):
    gw = make_gateway(FIXTURES / "tools", env={"TOOLDOCK_RESTART_BACKOFF": "0.1"})
    first = worker_pid(gw, "testing")
    os.kill(first, signal.SIGKILL)
    gw.wait_for(lambda: gw.namespace("testing").get("pid") not in (None, first), what="a new worker")
    second = worker_pid(gw, "testing")
    assert gw.call("testing", "pid").json()["result"] == second
    server = parent_of(second)
    os.kill(server, signal.SIGKILL)  # the fork server goes: its workers follow, and both come back
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = gw.call("testing", "pid")
        if response.status_code == 200 and response.json()["result"] != second:
            break
        time.sleep(0.2)
    third = worker_pid(gw, "testing")
    assert third != second and parent_of(third) != server
    assert "tooldock.worker.forkserver" in cmdline(parent_of(third))
    assert "exit" in gw.logs or "restart" in gw.logs


def test_fork_workers_off_spawns_workers_from_the_gateway(make_gateway):
    gw = make_gateway(FIXTURES / "tools", env={"TOOLDOCK_FORK_WORKERS": "false"})
    pid = worker_pid(gw, "testing")
    assert parent_of(pid) == gw.proc.pid and "-m tooldock.worker " in cmdline(pid)


def test_a_forked_worker_shares_the_framework_and_nothing_is_left_at_shutdown(make_gateway):
    gw = make_gateway(FIXTURES / "tools")
    pid = worker_pid(gw, "testing")
    server = parent_of(pid)
    forked = private_mb(pid)
    assert forked < 40, f"a forked worker holds {forked:.1f} MB of private memory"  # spawned: ~75 MB
    gw.stop()

    def gone(pid: int) -> bool:
        try:
            return "zombie" in Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return True

    # stopped with the gateway, or at the latest by their parent watch (which looks once a second)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (gone(pid) and gone(server)):
        time.sleep(0.1)
    assert gone(pid) and gone(server)


def test_the_base_environments_fork_server_starts_before_any_worker_is_asked_for_and_is_the_one_used(tmp_path):
    """`tooldock serve` calls ProcessBackend.warm_up before it imports the gateway, so the base environment's
    fork server imports the framework beside the gateway's own imports: it runs before anything asked for a
    worker, and the workers are forked from that same server (not a second one), which goes with the backend."""
    import asyncio

    from conftest import STATE_DIR

    from tooldock.runtime.backends.process import ProcessBackend
    from tooldock.runtime.settings import Settings

    namespace = tmp_path / "tools" / "early"
    namespace.mkdir(parents=True)
    (namespace / "hello.py").write_text(
        "from fastmcp.tools import tool\n\n\n@tool\ndef hello() -> str:\n    \"\"\"Hello.\"\"\"\n    return 'hi'\n"
    )
    settings = Settings.from_env({"TOOLDOCK_STATE_DIR": str(STATE_DIR), "TOOLDOCK_BEARER_TOKEN": "t" * 16})

    async def body() -> None:
        backend = ProcessBackend(settings, tmp_path / "tools")
        assert backend.forks is not None
        interpreter, _ = await backend.envs.ensure("early", None, "", None)  # built once, cached for the suite
        assert backend.envs.ready() == interpreter
        backend.warm_up()
        server = backend.forks.for_interpreter(interpreter)
        early = server.pid
        assert early is not None and "tooldock.worker.forkserver" in cmdline(early) and parent_of(early) == os.getpid()
        socket_path = backend.socket_dir / "early.sock"
        args = ["--namespace", "early", "--dir", str(namespace), "--socket", str(socket_path)]
        forked = await server.spawn(args, dict(backend.forks.env), namespace)
        try:
            assert server.pid == early and parent_of(forked.pid) == early
            deadline = time.monotonic() + 30
            while not socket_path.exists():
                assert forked.returncode is None and time.monotonic() < deadline, "the forked worker did not serve"
                await asyncio.sleep(0.05)
        finally:
            forked.send_signal(signal.SIGTERM)
            await asyncio.wait_for(forked.wait(), 10)
            await backend.close()
        assert not Path(f"/proc/{early}").exists() or "zombie" in Path(f"/proc/{early}/status").read_text()

    asyncio.run(body())


def test_a_fork_server_started_speculatively_exits_when_nothing_forks_from_it(tmp_path):
    """warm_up's fork server (`--unused-exit`) goes away when no namespace used its environment (every one had
    requirements of its own); one that forked stays (the test above uses one within its time)."""
    import subprocess
    import sys

    socket_path = tmp_path / "f.sock"
    proc = subprocess.Popen(
        [sys.executable, "-s", "-m", "tooldock.worker.forkserver", "--socket", str(socket_path), "--unused-exit", "1"]
    )
    try:
        deadline = time.monotonic() + 60
        while not socket_path.exists() and proc.poll() is None:
            assert time.monotonic() < deadline, "the fork server did not start"
            time.sleep(0.05)
        assert proc.wait(30) == 0
        assert not socket_path.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
