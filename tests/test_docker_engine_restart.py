"""The Docker engine goes away and comes back: the gateway survives, reconnects to the event stream,
rediscovers its worker containers and starts them again. Uses a Docker engine of its own, so stopping
it disturbs no other test."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, Gateway, require, tooldock_cli

SOCK = "/tmp/tooldock-restart-docker.sock"
FLAGS = ["--host", f"unix://{SOCK}", "--bridge=none", "--iptables=false", "--ip6tables=false",
         "--data-root", "/var/lib/tooldock-restart-docker", "--exec-root", "/tmp/tooldock-restart-exec",
         "--pidfile", "/tmp/tooldock-restart-dockerd.pid"]


def start_engine(log) -> subprocess.Popen:
    import docker

    proc = subprocess.Popen(["dockerd", *FLAGS], stdout=log, stderr=log)
    deadline = time.monotonic() + 90
    while True:
        try:
            docker.DockerClient(base_url=f"unix://{SOCK}").ping()
            return proc
        except Exception:
            assert proc.poll() is None and time.monotonic() < deadline, "dockerd did not start"
            time.sleep(0.5)


@pytest.fixture
def engine(tmp_path):
    require("dockerd", root=True)
    log = open(tmp_path / "dockerd.log", "ab")
    holder = {"proc": start_engine(log)}
    yield holder, log
    import docker

    try:
        client = docker.DockerClient(base_url=f"unix://{SOCK}")
        for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"}):
            container.remove(force=True)
    except Exception:
        pass
    holder["proc"].terminate()
    holder["proc"].wait(60)
    log.close()


def test_gateway_survives_an_engine_restart(engine, tmp_path):
    holder, log = engine
    sockets = Path(tempfile.mkdtemp(prefix="tdr-"))
    env = {"DOCKER_HOST": f"unix://{SOCK}", "TOOLDOCK_SOCKET_DIR": str(sockets), "TOOLDOCK_RESTART_BACKOFF": "0.2"}
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "multi-tool", src / "multi-tool", ignore=shutil.ignore_patterns("__pycache__"))
    tooldock_cli("deploy", str(src / "multi-tool"), env=env)
    gw = Gateway(tmp_path, tmp_path / "gateway.log", env, args=("--backend", "docker")).start()
    try:
        assert gw.call("multi-tool", "add", a=1, b=2).json() == {"result": 3}
        holder["proc"].terminate()  # the engine stops, and its containers with it
        holder["proc"].wait(60)
        gw.wait_for(lambda: gw.namespace("multi-tool")["state"] != "ready", what="the gateway to notice")
        assert gw.get("/health").status_code == 200  # the gateway itself is fine
        holder["proc"] = start_engine(log)
        gw.wait_for(lambda: gw.call("multi-tool", "add", a=2, b=2).status_code == 200, timeout=90,
                    what="the worker to be rediscovered and restarted")
        assert gw.call("multi-tool", "add", a=2, b=3).json() == {"result": 5}
        assert gw.get("/health").json()["status"] == "ok"
    finally:
        gw.stop()
        shutil.rmtree(sockets, ignore_errors=True)
