"""A Docker Swarm for the tests: an engine put into swarm mode with `docker swarm init --advertise-addr
127.0.0.1`, and taken out again (`docker swarm leave --force`) at the end if it was not in a swarm before. The
engine is a `dockerd` of the swarm tests' own when they run as root (`own_engine`), else the one DOCKER_HOST
names. Skips with the reason when the engine cannot be a swarm manager or an overlay
network cannot carry traffic (CI=true: fails).

`publish_mode()` says how the tests publish the gateway: the routing mesh needs IPVS in the kernel; without
it (`/proc/sys/net/ipv4/vs` missing, as on the Firecracker kernel of the test machines) the published port of
an ingress service never answers, so the tests use `--publish edge` (HAProxy published in host mode).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

IPVS = Path("/proc/sys/net/ipv4/vs")


def _fail_or_skip(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


def docker(host: str, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], env={**os.environ, "DOCKER_HOST": host}, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc


def publish_mode() -> str:
    return "mesh" if IPVS.is_dir() else "edge"


def swarm_state(host: str) -> str:
    return docker(host, "info", "--format", "{{.Swarm.LocalNodeState}}").stdout.strip()


SOCKET = Path("/tmp/tooldock-swarm-docker.sock")
DATA_ROOT, EXEC_ROOT = "/var/lib/tooldock-swarm-docker", "/tmp/tooldock-swarm-docker-exec"
PIDFILE = "/tmp/tooldock-swarm-dockerd.pid"


def own_engine(log_dir: Path) -> Iterator[str]:
    """A `dockerd` of the swarm tests' own (as root), flags as conftest's test engine has them. Not the
    shared test engine: another test session may stop that one (the session that started it does, at its
    end) or start it again while a swarm runs, and a swarm left by a killed run would keep its services
    running there for everyone. Here a swarm left behind is left (`swarm leave --force`) on the next start."""
    from conftest import require

    require("dockerd", root=True)
    host = f"unix://{SOCKET}"
    log = open(log_dir / "swarm-dockerd.log", "ab")
    proc = subprocess.Popen(
        ["dockerd", "--host", host, "--bridge=none", "--iptables=false", "--ip6tables=false", "--data-root",
         DATA_ROOT, "--exec-root", EXEC_ROOT, "--pidfile", PIDFILE], stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while docker(host, "version", check=False).returncode != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _fail_or_skip(f"the swarm tests' dockerd did not start; see {log_dir / 'swarm-dockerd.log'}")
        time.sleep(0.5)
    try:
        if swarm_state(host) != "inactive":  # a killed run's swarm: its services go with it
            docker(host, "swarm", "leave", "--force", check=False)
        yield host
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()


def swarm_up(host: str) -> Iterator[str]:
    """The engine as a one-node swarm manager, for the duration of the generator."""
    from conftest import require

    require("docker")
    made = False
    if swarm_state(host) != "active":
        init = docker(host, "swarm", "init", "--advertise-addr", "127.0.0.1", check=False)
        if init.returncode != 0:
            _fail_or_skip(f"docker swarm init failed: {init.stderr.strip()[-500:]}")
        made = True
    try:
        manager = docker(host, "info", "--format", "{{.Swarm.ControlAvailable}}").stdout.strip()
        if manager != "true":
            _fail_or_skip("the test engine is a swarm worker, not a manager: swarm tests need a manager")
        yield host
    finally:
        if made:
            docker(host, "swarm", "leave", "--force", check=False)
