"""A worker's descendants, read from /proc: the processes its tools started that left its process group.

A worker leads its own process group, and the process backend (runtime/backends/process.py) ends the group
with the worker; a worker whose gateway is gone ends it itself (`__main__.end_own_group`). A tool's child that
started a session or group of its own (`subprocess.Popen(..., start_new_session=True)`, `setsid`) is not in
it, but it is still in the worker's subtree while the worker lives: `Family.of(pid)` takes that subtree
(each process's pid and start time, so that a pid the kernel gives to another process later is left alone),
before anything is signalled, and `signal` reaches the ones still there once the worker is gone.

What this cannot see: a process that left the subtree before (a daemon's double fork re-parents it to init
at once), and the processes a worker that crashed left behind (re-parented when it died). Linux only: with
no /proc, a family is empty and only the group is ended.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
MAX_MEMBERS = 4096  # a fork bomb's subtree is not walked for ever; the group's SIGKILL still reaches most of it


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in (PROC / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _started(pid: int) -> int | None:
    """The process's start time (clock ticks since boot; field 22 of /proc/<pid>/stat), None once it is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after the command, which may hold spaces and parentheses
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


@dataclass
class Family:
    members: dict[int, int] = field(default_factory=dict)  # pid -> start time

    @classmethod
    def of(cls, pid: int) -> Family:
        """`pid`'s descendants now (not `pid` itself)."""
        members: dict[int, int] = {}
        todo = _children(pid)
        while todo and len(members) < MAX_MEMBERS:
            child = todo.pop()
            started = _started(child)
            if started is not None and child not in members:
                members[child] = started
                todo += _children(child)
        return cls(members)

    def alive(self) -> list[int]:
        """The members still running as the same processes."""
        return [pid for pid, started in self.members.items() if _started(pid) == started]

    def signal(self, sig: int) -> bool:
        """Send `sig` to each member still there; whether any was."""
        there = self.alive()
        for pid in there:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return bool(there)
