"""Processes a tool starts do not outlive its worker: when the worker is stopped, replaced, put to sleep or
dies, what its tools left running in its process group is ended (SIGTERM, then SIGKILL a second later), and
so are the children that left the group (a session of their own) while the worker lived."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tooldock.worker.family import Family

CHILDREN = '''import os
import subprocess

from fastmcp.tools import tool


@tool
def spawn(stubborn: bool = False, own_session: bool = False) -> int:
    """Start a child process that outlives the call; a stubborn one ignores SIGTERM; one in a session of its
    own has left the worker's process group."""
    trap = "trap '' TERM; " if stubborn else ""
    return subprocess.Popen(["sh", "-c", trap + "exec sleep 300"], start_new_session=own_session).pid


@tool
def die() -> str:
    """End the worker at once."""
    os._exit(9)
'''


def gone(pid: int) -> bool:
    """Ended: no such process, or a zombie waiting for whoever reaps orphans here."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def started(gw, stubborn: bool = False, own_session: bool = False) -> int:
    reply = gw.call("kids", "spawn", stubborn=stubborn, own_session=own_session)
    assert reply.status_code == 200, reply.text
    pid = reply.json()["result"]
    assert not gone(pid)
    return pid


@pytest.fixture(params=["1", "0"], ids=["forked", "spawned"])
def kids(request, make_gateway, tmp_path):
    def make(config: str = ""):
        folder = tmp_path / "src" / "kids"
        folder.mkdir(parents=True)
        (folder / "tools.py").write_text(CHILDREN)
        if config:
            (folder / "tooldock.yaml").write_text(config)
        return make_gateway(tmp_path / "src", env={"TOOLDOCK_FORK_WORKERS": request.param,
                                                   "TOOLDOCK_RESTART_BACKOFF": "0.1"})

    return make


def test_a_dying_workers_children_end_with_it_and_the_next_worker_serves(kids):
    gw = kids()
    first = gw.namespace("kids")["pid"]
    plain, stubborn = started(gw), started(gw, stubborn=True)
    assert gw.call("kids", "die").status_code == 500
    gw.wait_for(lambda: gone(plain) and gone(stubborn), timeout=15, what="the tool's children to end")
    gw.wait_for(lambda: gw.namespace("kids")["state"] == "ready", what="the worker to come back")
    assert gw.namespace("kids")["pid"] != first
    assert not gone(started(gw))  # the new worker's tools start children as before


def test_stopping_the_gateway_ends_its_workers_children(kids):
    gw = kids()
    plain, stubborn = started(gw), started(gw, stubborn=True)
    # children that left the worker's process group: still below the worker, found there
    apart, apart_stubborn = started(gw, own_session=True), started(gw, stubborn=True, own_session=True)
    gw.stop()  # returns once the gateway exited: a SIGKILL sent just before may take a moment to land
    gw.wait_for(lambda: all(gone(pid) for pid in (plain, stubborn, apart, apart_stubborn)), timeout=5,
                what="the tool's children to end")


def test_a_worker_put_to_sleep_takes_its_children_with_it(kids):
    gw = kids("idle_timeout: 1\n")
    child, apart = started(gw), started(gw, stubborn=True, own_session=True)
    gw.wait_for(lambda: gw.namespace("kids")["state"] == "sleeping", what="the worker to go to sleep")
    gw.wait_for(lambda: gone(child) and gone(apart), timeout=10, what="the children to end")
    assert gw.call("kids", "spawn").status_code == 200  # woken, it serves as before


def test_a_killed_gateways_workers_end_their_childrens_group_as_they_exit(kids):
    # No one is left to end the group: each worker, seeing its parent gone, ends it as its last act.
    gw = kids()
    worker = gw.namespace("kids")["pid"]
    plain, stubborn = started(gw), started(gw, stubborn=True)
    apart = started(gw, stubborn=True, own_session=True)
    gw.proc.kill()
    gw.proc.wait(10)
    gw.wait_for(lambda: gone(worker), timeout=15, what="the worker to exit")
    gw.wait_for(lambda: gone(plain) and gone(stubborn) and gone(apart), timeout=5, what="the tool's children to end")


def test_a_family_is_the_subtree_and_a_reused_pid_is_left_alone():
    """family.py: the descendants of a process, with their start times; a member whose pid now belongs to
    another process (another start time) is neither counted nor signalled."""
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "print('ok', flush=True)\n"
        "time.sleep(300)\n")], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == b"ok\n"
        family = Family.of(parent.pid)
        assert len(family.members) == 1 and parent.pid not in family.members
        (child,) = family.members
        impostor = Family({child: family.members[child] + 1})  # the same pid, another process
        assert impostor.alive() == [] and impostor.signal(signal.SIGKILL) is False and not gone(child)
        assert family.signal(signal.SIGKILL) is True
        deadline = time.monotonic() + 5
        while not gone(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(child)
    finally:
        parent.kill()
        parent.wait(10)
