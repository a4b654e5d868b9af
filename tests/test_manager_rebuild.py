"""`reload_core` on the docker backend: `tooldock serve --backend docker --manager` with a real Docker engine.
The manager rebuilds the edited namespace with the daemonless builder, deploys it as a new container
generation, and the gateway swaps it in while 8 clients call it: no call fails, the new digest is reported.
A broken edit fails its start and the old container keeps serving."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import BUILD_CACHE, MANAGER_ARGS, Gateway, manager_url, run_manager
from test_manager import CALC_V1, CALC_V2

pytestmark = pytest.mark.slow

BROKEN = "import tooldock_no_such_module_xyz  # fails at import, inside the container\n\n" + CALC_V1


@pytest.fixture
def docker_pair(docker_host, tmp_path):
    import docker

    tools = tmp_path / "tools"
    (tools / "calc").mkdir(parents=True)
    (tools / "calc" / "arith.py").write_text(CALC_V1)
    sockets = Path(tempfile.mkdtemp(prefix="tdm-"))  # short: unix socket paths are limited
    env = {
        "DOCKER_HOST": docker_host,
        "TOOLDOCK_SOCKET_DIR": str(sockets),
        "TOOLDOCK_CACHE_DIR": str(BUILD_CACHE),
        "TOOLDOCK_DRAIN_TIMEOUT": "10",
        "MANAGER_INTERNAL_TOKEN": "manager-token-rebuild-0123",
    }
    gateway = Gateway(tools, tmp_path / "gateway.log", env, args=("--backend", "docker", *MANAGER_ARGS)).start()
    yield gateway, manager_url(gateway)
    gateway.stop()
    client = docker.DockerClient(base_url=docker_host)
    for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace=calc"}):
        if any(str(m.get("Source", "")).startswith(str(sockets)) for m in container.attrs.get("Mounts") or []):
            container.remove(force=True)
    shutil.rmtree(sockets, ignore_errors=True)


def test_reload_core_rebuilds_and_hot_swaps_under_load(docker_pair):
    import httpx

    gateway, url = docker_pair
    first = run_manager(url, lambda call: call("reload_core"))
    assert first[0] is False, first
    digest_v1 = first[1]["images_built"]["calc"]
    assert digest_v1.startswith("sha256:") and first[1]["failed"] == {}
    gateway.wait_for(lambda: gateway.call("calc", "add", a=1, b=1).json() == {"result": 2}, 60, "version 1")

    stop = threading.Event()
    outcomes: list[tuple[int, object]] = []
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(headers=gateway.headers("calc"), timeout=30) as http:
            deadline = time.monotonic() + 240  # bounded even if the reload hangs
            while not stop.is_set() and time.monotonic() < deadline and len(outcomes) < 50_000:
                reply = http.post(f"{gateway.url}/tools/add", json={"a": 1, "b": 1})
                with lock:
                    outcomes.append((reply.status_code, reply.json().get("result")))

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(1)

    async def edit_and_reload(call):
        return await call("write_tool", namespace="calc", filename="arith.py", code=CALC_V2), await call("reload_core")

    started = time.monotonic()
    (_, written), (error, reloaded) = run_manager(url, edit_and_reload)
    seconds = time.monotonic() - started
    time.sleep(1.5)  # a tail of calls on the new version
    stop.set()
    for thread in threads:
        thread.join(60)
    print(f"\ndocker reload_core after a one-file edit: {seconds:.2f}s, {len(outcomes)} calls during it")
    assert written["written"] is True
    assert error is False and reloaded["failed"] == {}, reloaded
    digest_v2 = reloaded["images_built"]["calc"]
    assert digest_v2.startswith("sha256:") and digest_v2 != digest_v1
    failures = [o for o in outcomes if o[0] != 200]
    assert len(outcomes) > 50 and failures == [], f"{len(failures)} of {len(outcomes)} calls failed: {failures[:5]}"
    assert {result for _, result in outcomes} <= {2, 1002}
    assert outcomes[-1] == (200, 1002)
    assert gateway.call("calc", "add", a=1, b=1).json() == {"result": 1002}

    # An unchanged folder builds to the same image: nothing is redeployed.
    again = run_manager(url, lambda call: call("reload_core"))
    assert again[1]["images_built"] == {} and again[1]["failed"] == {}

    # A broken edit (fails at import inside the container): reported, and version 2 keeps serving.
    (gateway.tools_dir / "calc" / "arith.py").write_text(BROKEN)
    error, broken = run_manager(url, lambda call: call("reload_core"))
    assert error is False and "calc" in broken["failed"], broken
    assert "previous version keeps serving" in broken["failed"]["calc"]
    assert "calc" not in broken["images_built"]
    assert gateway.call("calc", "add", a=1, b=1).json() == {"result": 1002}
