"""How the suite runs on several pytest-xdist workers (`scripts/test` passes `-n 3`; `-n 0` is serial).

- Every test file runs whole on one worker, in its own order: its module fixtures (a gateway, a deployed
  stack, a built image) are built once, as in a serial run.
- The files whose tests use the test Docker engine (the `docker_host` fixture, directly or through another
  fixture) run one after another on one worker, the group "docker": a gateway on the docker backend serves
  every ToolDock container in that engine, and some tests count the engine's containers before and after.
  test_swarm.py and test_docker_engine_restart.py start engines of their own (other sockets and data
  roots): they are groups of their own.
- The groups that take longest start first (`SECONDS`), so that no long file starts near the end.

The workers know which files use `docker_host` (they collect the tests); xdist's scheduler, in the main
process, only sees test ids. So each worker writes the groups to a file named by the run's id, which the
scheduler of this module reads once every worker has collected (xdist's own `xdist_group` marks do not reach
its scheduler under pytest 9.2: pytest-xdist 3.8 renames the test ids through an attribute pytest no longer
reads). Shared state the workers could fight over is made safe where it lives: the npm installs and
virtualenvs in the test state directory are made once under a file lock (conftest.npm_install, the mcp1
and mcp-server-time venvs), the build cache tolerates builds side by side (tooldock's builder), ports are
free ones, temp folders are per worker. A serial run (`-n 0`, `-p no:xdist`, or no `-n`) is not changed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tooldock.atomic import atomic_write

DOCKER_GROUP = "docker"
# Seconds each group took in a serial run on a 2-core machine under other load (setup + call + teardown of
# its tests; the 30 longest of a whole run of 49.6 min on 2026-11-28); groups not listed come after these, in
# collection order. Only the order depends on these figures: a stale one costs wall time, never a result.
SECONDS: dict[str, float] = {
    "docker": 480, "test_build": 218, "test_manager": 130, "test_fuzz": 119, "test_swarm": 114,
    "test_author_loop": 101, "test_upstream": 99, "test_dashboard": 97, "test_mcp_lean_modern": 84,
    "test_supervision": 82, "test_relay_client": 52, "test_check_cli": 51, "test_manager_install": 50,
    "test_replicas_faults": 49, "test_reload": 46, "test_replicas_tasks": 45, "test_replicas_streams": 41,
    "test_context_state": 36, "test_gateway_rest": 35, "test_serve_replicas_workers": 34, "test_tasks": 32,
    "test_relay_socket": 32, "test_browser": 31, "test_soak": 31, "test_conformance": 30,
    "test_secrets_injection": 30, "test_http_edge": 29, "test_context_meta": 27, "test_conformance_tasks": 26,
    "test_worker_children": 26,
}  # fmt: skip


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def groups_of(items: list[pytest.Item]) -> dict[str, str]:
    """Each test file's group: "docker" if one of its tests uses `docker_host`, else the file's name."""
    docker: dict[str, bool] = {}
    for item in items:
        path = file_of(item.nodeid)
        docker[path] = docker.get(path, False) or "docker_host" in getattr(item, "fixturenames", ())
    return {path: DOCKER_GROUP if used else Path(path).stem for path, used in docker.items()}


def _groups_file(run: str) -> Path:
    return Path(tempfile.gettempdir()) / f"tooldock-test-groups-{run}.json"


def sort(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: write the groups for the scheduler, and sort the groups longest first (a stable
    sort: a file's tests keep their order). Every worker collects and sorts alike, as xdist requires."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    groups = groups_of(items)
    atomic_write(_groups_file(workerinput["testrunuid"]), json.dumps(groups).encode())
    first: dict[str, int] = {}
    for path in groups:
        first.setdefault(groups[path], len(first))

    def key(item: pytest.Item) -> tuple[float, int]:
        name = groups[file_of(item.nodeid)]
        return -SECONDS.get(name, 0.0), first[name]

    items.sort(key=key)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `-n N` (xdist's default distribution, or `--dist loadgroup`): every group one unit of work, sent
    whole to one worker, in the workers' (sorted) order."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # another mode asked for by name: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def schedule(self) -> None:
            if self.groups is None and self.nodes:
                written = _groups_file(self.nodes[0].workerinput["testrunuid"])
                self.groups = json.loads(written.read_text())
                written.unlink(missing_ok=True)
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            assert self.groups is not None, "the workers' groups were not read"
            return self.groups[file_of(nodeid)]

    config.option.loadscopereorder = False  # the collection's order (longest first), not most tests first
    return ByGroup(config, log)
