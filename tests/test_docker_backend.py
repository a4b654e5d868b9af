"""The docker backend end to end: `tooldock deploy` starts hardened worker containers, `tooldock serve
--backend docker` finds them by label, serves them to the official MCP client, survives `docker kill`,
and follows a redeploy with no restart of its own."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, FIXTURES, Gateway, run_mcp, tooldock_cli


@pytest.fixture(scope="module")
def deployed(docker_host, tmp_path_factory):
    """examples/multi-tool, basic-tool and the testing fixture, deployed once; removed at the end."""
    import docker

    src = tmp_path_factory.mktemp("deploy-src")
    for folder in (EXAMPLES / "multi-tool", EXAMPLES / "basic-tool", FIXTURES / "tools" / "testing"):
        shutil.copytree(folder, src / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
    sockets = Path(tempfile.mkdtemp(prefix="tds-"))  # short: unix socket paths are limited
    env = {"DOCKER_HOST": docker_host, "TOOLDOCK_SOCKET_DIR": str(sockets)}
    proc = tooldock_cli("deploy", str(src / "multi-tool"), str(src / "basic-tool"), str(src / "testing"), "--json",
                        "--drain", "5", env=env)
    results = {r["namespace"]: r for r in map(json.loads, proc.stdout.splitlines())}
    yield {"src": src, "sockets": sockets, "env": env, "results": results}
    client = docker.DockerClient(base_url=docker_host)
    for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"}):
        if any(str(m.get("Source", "")).startswith(str(sockets)) for m in container.attrs.get("Mounts") or []):
            container.remove(force=True)
    shutil.rmtree(sockets, ignore_errors=True)


@pytest.fixture(scope="module")
def docker_gateway(deployed, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docker-gw")
    from test_upstream import ONE_DEMO, write_upstream

    write_upstream(tmp, "up", ONE_DEMO)  # an upstream folder, served beside the containers
    write_upstream(tmp, "basic-tool", ONE_DEMO)  # one named like a container: the container wins
    gw = Gateway(tmp, tmp / "gateway.log", {**deployed["env"], "TOOLDOCK_RESTART_BACKOFF": "0.2"},
                 args=("--backend", "docker")).start()
    yield gw
    gw.stop()


def test_deploy_reports_and_hardens_the_containers(deployed, docker_host):
    import docker

    results = deployed["results"]
    assert set(results) == {"multi-tool", "basic-tool", "testing"}
    assert results["multi-tool"]["tools"] == ["add", "multiply", "reverse_text", "word_count"]
    container = docker.DockerClient(base_url=docker_host).containers.get(results["multi-tool"]["container"])
    host = container.attrs["HostConfig"]
    assert container.attrs["Config"]["User"] == "65532:65532"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["NetworkMode"] == "none"
    assert host["Memory"] == 256 * 1024 * 1024 and host["NanoCpus"] == 1_000_000_000 and host["PidsLimit"] == 256
    assert "/tmp" in host["Tmpfs"]
    rows = [json.loads(line) for line in tooldock_cli("ps", "--json", env=deployed["env"]).stdout.splitlines()]
    mine = {r["namespace"]: r for r in rows if r["socket"] and r["socket"].startswith(str(deployed["sockets"]))}
    assert mine["multi-tool"]["healthy"] and mine["multi-tool"]["status"] == "running"


def test_gateway_serves_deployed_containers_to_the_mcp_client(docker_gateway):
    async def body(session):
        tools = await session.list_tools()
        return [t.name for t in tools.tools], await session.call_tool("add", {"a": 2, "b": 3})

    names, result = run_mcp(docker_gateway, "multi-tool", body)
    assert names == ["add", "multiply", "reverse_text", "word_count"]
    assert result.structured_content == {"result": 5}
    listing = {n["name"]: n for n in docker_gateway.get("/namespaces").json()["namespaces"]}
    assert listing["multi-tool"]["state"] == "ready" and listing["multi-tool"]["pid"].startswith("tooldock-multi-tool-")


def test_upstream_folders_are_served_beside_the_containers(docker_gateway):
    from test_upstream import run, session, text

    docker_gateway.wait_for(lambda: docker_gateway.namespace("up")["state"] == "ready", what="the upstream namespace")
    body = docker_gateway.get("/namespaces").json()
    listing = {n["name"]: n for n in body["namespaces"]}
    assert listing["up"]["kind"] == "upstream" and listing["basic-tool"].get("kind") != "upstream"
    assert any(p["code"] == "duplicate_namespace" and p["file"].startswith("basic-tool/") for p in body["problems"])

    async def call() -> str:
        async with session(docker_gateway, "up") as client:
            return text(await client.call_tool("demo_add", {"a": 2, "b": 40}))

    assert run(call()) == "42"


def test_docker_kill_mid_call_fails_cleanly_and_the_worker_comes_back(docker_gateway, deployed, docker_host):
    import docker

    container = docker.DockerClient(base_url=docker_host).containers.get(deployed["results"]["testing"]["container"])
    replies = []
    caller = threading.Thread(target=lambda: replies.append(docker_gateway.call("testing", "slow", seconds=10)))
    caller.start()
    docker_gateway.wait_for(lambda: docker_gateway.namespace("testing")["inflight"] == 1, what="the call in flight")
    container.kill()
    caller.join(30)
    (reply,) = replies
    assert reply.status_code == 500 and "exited during the call" in reply.json()["error"]["message"]
    docker_gateway.wait_for(lambda: docker_gateway.namespace("testing")["state"] == "ready", what="the restart")
    assert docker_gateway.namespace("testing")["restarts"] >= 1
    assert docker_gateway.call("testing", "echo", value={"back": True}).json() == {"result": {"back": True}}


def test_a_container_stuck_in_an_abandoned_sync_call_is_restarted(docker_gateway, deployed, docker_host):
    """A client that goes away cancels its call; a sync tool's thread cannot be stopped, so 5 s later
    (TOOLDOCK_STUCK_AFTER) the gateway restarts the container, which serves again."""
    import docker

    container = docker.DockerClient(base_url=docker_host).containers.get(deployed["results"]["testing"]["container"])
    started = container.attrs["State"]["StartedAt"]
    before = docker_gateway.namespace("testing")["restarts"]
    headers = docker_gateway.headers("testing", **{"Content-Type": "application/json"})
    docker_gateway.post_and_leave("/tools/slow", headers, '{"seconds": 3600}', wait=1)

    def restarted() -> bool:
        now = docker_gateway.namespace("testing")
        return now["restarts"] > before and now["state"] == "ready"

    docker_gateway.wait_for(restarted, timeout=60, what="the stuck container's restart")
    assert docker_gateway.namespace("testing")["last_error"].startswith("restarted: 'slow' still runs")
    container.reload()
    assert container.attrs["State"]["StartedAt"] != started and container.status == "running"
    assert docker_gateway.call("testing", "echo", value={"back": True}).json() == {"result": {"back": True}}


def test_redeploy_swaps_the_namespace_without_restarting_the_gateway(docker_gateway, deployed, docker_host):
    import docker

    hello = deployed["src"] / "basic-tool" / "hello.py"
    hello.write_text(hello.read_text().replace('f"Hello, {name}!"', 'f"Howdy, {name}!"'))
    before = deployed["results"]["basic-tool"]["container"]
    result = json.loads(tooldock_cli("deploy", str(deployed["src"] / "basic-tool"), "--json", "--drain", "10",
                                     env=deployed["env"]).stdout)
    assert result["replaced"] == [before]
    assert result["generation"] == deployed["results"]["basic-tool"]["generation"] + 1
    docker_gateway.wait_for(
        lambda: docker_gateway.call("basic-tool", "say_hello", name="Ada").json() == {"result": "Howdy, Ada!"},
        what="the new version to be served")
    client = docker.DockerClient(base_url=docker_host)
    assert not client.containers.list(all=True, filters={"name": before})
    assert docker_gateway.call("multi-tool", "add", a=1, b=1).json() == {"result": 2}


def test_hot_swap_under_load_drops_no_call(docker_gateway, deployed):
    """20 clients call multi-tool while an edited version (one more tool) is built, deployed and swapped in:
    no call fails, the new tool is served afterwards, and an open MCP session hears list_changed.
    Bounded: the load stops 2 s after the deploy returns, and never runs longer than 60 s."""
    import asyncio

    import httpx
    import httpx2
    import mcp_types as types
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    strings = deployed["src"] / "multi-tool" / "string_tools.py"  # an existing tool file, edited
    strings.write_text(strings.read_text() + "\n\n@tool\ndef version() -> str:\n    \"\"\"Which build.\"\"\"\n    return 'v2'\n")
    stop = threading.Event()
    outcomes: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(headers=docker_gateway.headers("multi-tool"), timeout=30) as http:
            deadline = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < deadline:
                reply = http.post(f"{docker_gateway.url}/tools/add", json={"a": 1, "b": 2})
                ok = reply.status_code == 200 and reply.json() == {"result": 3}
                with lock:
                    outcomes.append(200 if ok else reply.status_code)

    heard: list[str] = []

    async def watch_session(done: threading.Event) -> None:
        async def on_message(message) -> None:
            if isinstance(message, types.ServerNotification):
                heard.append(message.method)

        async with httpx2.AsyncClient(headers=docker_gateway.headers("multi-tool"), timeout=60) as http:
            async with streamable_http_client(f"{docker_gateway.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as session:
                    await session.initialize()
                    await session.list_tools()
                    while not done.is_set():
                        await asyncio.sleep(0.1)

    session_done = threading.Event()
    watcher = threading.Thread(target=lambda: asyncio.run(watch_session(session_done)))
    watcher.start()
    threads = [threading.Thread(target=client) for _ in range(20)]
    for t in threads:
        t.start()
    time.sleep(2)
    result = json.loads(tooldock_cli("deploy", str(deployed["src"] / "multi-tool"), "--json", "--drain", "20",
                                     env=deployed["env"]).stdout)
    time.sleep(2)
    stop.set()
    for t in threads:
        t.join(60)
    docker_gateway.wait_for(lambda: len(heard) >= 3, timeout=20, what="list_changed")
    session_done.set()
    watcher.join(30)
    failures = [code for code in outcomes if code != 200]
    assert result["replaced"] and "version" in result["tools"]
    assert len(outcomes) > 100 and failures == [], f"{len(failures)} of {len(outcomes)} calls failed: {failures[:5]}"
    assert docker_gateway.call("multi-tool", "version").json() == {"result": "v2"}
    assert heard[0] == "notifications/tools/list_changed" and len(heard) == 3, heard


def test_bad_deploys_are_clear_and_running_namespaces_keep_serving(docker_gateway, deployed, tmp_path):
    env = deployed["env"]
    unlabelled = tooldock_cli("deploy", "tooldock/no-such-image:1", env=env, check=False)
    assert unlabelled.returncode == 1 and "no image 'tooldock/no-such-image:1'" in unlabelled.stderr
    invalid = tooldock_cli("deploy", str(FIXTURES / "tools" / "broken-file"), env=env, check=False)
    assert invalid.returncode == 1 and "bad_syntax.py:5: syntax error" in invalid.stderr
    # Builds fine (the builder's import works), but dies as soon as it starts inside a container.
    crashy = tmp_path / "crashy"
    crashy.mkdir()
    (crashy / "dies.py").write_text(
        "import os\n\nfrom fastmcp.tools import tool\n\nif os.environ.get('TOOLDOCK_APP_DIR'):\n    os._exit(3)\n\n\n"
        "@tool\ndef never(x: int) -> int:\n    \"\"\"Never served.\"\"\"\n    return x\n"
    )
    dies = tooldock_cli("deploy", str(crashy), env=env, check=False)
    assert dies.returncode == 1 and "tooldock-crashy-1 did not become ready (exited)" in dies.stderr
    # The gateway follows Docker's events: the container it saw start is dropped once deploy has removed it.
    docker_gateway.wait_for(lambda: docker_gateway.get("/tools", "crashy").status_code == 404, timeout=30,
                            what="the failed deploy's namespace to be dropped")
    assert docker_gateway.call("multi-tool", "add", a=2, b=2).json() == {"result": 4}


def test_image_without_tooldock_labels_is_refused(docker_gateway, deployed, docker_host):
    import docker

    client = docker.DockerClient(base_url=docker_host)
    base = next(t for image in client.images.list(name="tooldock/base") for t in image.tags)
    proc = tooldock_cli("deploy", base, env=deployed["env"], check=False)
    assert proc.returncode == 1 and "has no ToolDock labels" in proc.stderr


def test_stop_removes_the_namespace_from_the_gateway(docker_gateway, deployed):
    removed = tooldock_cli("stop", "testing", env=deployed["env"]).stdout.split()
    assert removed and all(name.startswith("tooldock-testing-") for name in removed)
    docker_gateway.wait_for(lambda: docker_gateway.get("/tools", "testing").status_code == 404,
                            what="the gateway to drop the namespace")
    missing = tooldock_cli("stop", "testing", env=deployed["env"], check=False)
    assert missing.returncode == 1 and "no worker container" in missing.stderr


def test_idle_container_scales_to_zero_and_wakes(docker_gateway, deployed, docker_host, tmp_path):
    import docker

    folder = tmp_path / "sleepy"
    folder.mkdir()
    shutil.copy(FIXTURES / "tools" / "broken-file" / "good.py", folder / "good.py")
    (folder / "tooldock.yaml").write_text("idle_timeout: 1\n")
    env = {**deployed["env"], "TOOLDOCK_INLINE_SCHEMA_REFS": "true"}  # what deploys a container hands it on
    name = json.loads(tooldock_cli("deploy", str(folder), "--json", env=env).stdout)["container"]
    docker_gateway.wait_for(lambda: docker_gateway.get("/tools", "sleepy").status_code == 200, what="discovery")
    assert docker_gateway.call("sleepy", "still_works", x=3).json() == {"result": 6}
    container = docker.DockerClient(base_url=docker_host).containers.get(name)
    assert "TOOLDOCK_INLINE_SCHEMA_REFS=true" in container.attrs["Config"]["Env"]

    def stopped() -> bool:
        container.reload()
        return container.status == "exited"

    docker_gateway.wait_for(stopped, timeout=20, what="the idle container to stop")
    assert docker_gateway.namespace("sleepy")["state"] == "sleeping"
    assert [t["name"] for t in docker_gateway.get("/tools", "sleepy").json()["tools"]] == ["still_works"]
    assert docker_gateway.call("sleepy", "still_works", x=5).json() == {"result": 10}
    woken = docker_gateway.namespace("sleepy")
    container.reload()
    assert container.status == "running" and woken["last_wake_ms"] > 0
    print(f"\ncold start of a sleeping container: {woken['last_wake_ms']} ms")
    tooldock_cli("stop", "sleepy", env=deployed["env"])


def test_gateway_in_a_container_serves_the_deployed_workers(deployed, docker_host, tmp_path):
    """`tooldock deploy --gateway`: the gateway image, docker backend, host network on 127.0.0.1, the
    Docker socket and the worker socket directory mounted; it serves the workers deployed earlier."""
    import socket

    import docker
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**deployed["env"], "TOOLDOCK_BEARER_TOKEN": "container-gateway-token", "TOOLDOCK_STATE_DIR": str(tmp_path)}
    started = json.loads(tooldock_cli("deploy", "--gateway", "--port", str(port), "--json", env=env).stdout)
    client = docker.DockerClient(base_url=docker_host)
    try:
        assert started["url"] == f"http://127.0.0.1:{port}"
        headers = {"Authorization": "Bearer container-gateway-token", "X-Namespace": "multi-tool"}
        reply = httpx.post(f"{started['url']}/tools/add", json={"a": 20, "b": 22}, headers=headers, timeout=30)
        assert reply.status_code == 200 and reply.json() == {"result": 42}, client.containers.get("tooldock-gateway").logs().decode()[-3000:]
        attrs = client.containers.get("tooldock-gateway").attrs
        assert attrs["Config"]["User"] == "65532:65532" and attrs["HostConfig"]["ReadonlyRootfs"] is True
        assert attrs["HostConfig"]["NetworkMode"] == "host"
        # the token is a read-only file, not an environment variable `docker inspect` shows
        assert "container-gateway-token" not in json.dumps(attrs)
        assert "TOOLDOCK_BEARER_TOKEN_FILE=/run/secrets/tooldock/bearer_token" in attrs["Config"]["Env"]
        token_file = Path(env["TOOLDOCK_STATE_DIR"]) / "gateway-secrets" / "bearer_token"
        assert token_file.read_text() == "container-gateway-token" and token_file.stat().st_mode & 0o777 == 0o440
    finally:
        client.containers.get("tooldock-gateway").remove(force=True)


def test_gateway_as_a_compose_file_runs_with_docker_compose(deployed, docker_host, tmp_path):
    """`deploy --gateway --compose FILE` writes the same container as a compose file (and starts nothing);
    Debian's docker-compose runs it, and it serves the workers deployed earlier. The token stays a file."""
    import socket
    import subprocess

    import docker
    import httpx

    compose = shutil.which("docker-compose")
    if compose is None:
        message = "docker-compose is not installed (Debian: apt-get install docker-compose)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = tmp_path / "compose.yaml"
    env = {**deployed["env"], "TOOLDOCK_BEARER_TOKEN": "compose-gateway-token", "TOOLDOCK_STATE_DIR": str(tmp_path)}
    args = ("deploy", "--gateway", "--compose", str(path), "--port", str(port), "--json")
    written = json.loads(tooldock_cli(*args, env=env).stdout)
    assert written["compose"] == str(path) and written["url"] == f"http://127.0.0.1:{port}"
    text = path.read_text()
    assert "compose-gateway-token" not in text and "TOOLDOCK_BEARER_TOKEN_FILE" in text
    client = docker.DockerClient(base_url=docker_host)
    assert not client.containers.list(all=True, filters={"name": "tooldock-gateway"})  # nothing started
    run_env = {**os.environ, "DOCKER_HOST": docker_host}
    up = [compose, "-f", str(path), "-p", "tooldock-test", "up", "-d"]
    subprocess.run(up, env=run_env, check=True, capture_output=True, timeout=120)
    try:
        headers = {"Authorization": "Bearer compose-gateway-token", "X-Namespace": "multi-tool"}
        deadline = time.monotonic() + 60
        while True:
            try:
                reply = httpx.post(f"{written['url']}/tools/add", json={"a": 40, "b": 2}, headers=headers, timeout=5)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, client.containers.get("tooldock-gateway").logs().decode()[-3000:]
                time.sleep(0.3)
        assert reply.status_code == 200 and reply.json() == {"result": 42}, reply.text
        attrs = client.containers.get("tooldock-gateway").attrs
        assert "compose-gateway-token" not in json.dumps(attrs)
        assert attrs["HostConfig"]["ReadonlyRootfs"] is True and attrs["HostConfig"]["CapDrop"] == ["ALL"]
    finally:
        down = [compose, "-f", str(path), "-p", "tooldock-test", "down"]
        subprocess.run(down, env=run_env, capture_output=True, timeout=120)


def test_read_only_discovery_never_restarts_a_container(docker_gateway, deployed, docker_host, tmp_path):
    """`--read-only`: serves what it finds, but a container that dies stays dead (the operator's tooling
    owns the containers). Runs last: it stops the module's managing gateway first."""
    import docker

    docker_gateway.stop()
    gw = Gateway(tmp_path, tmp_path / "ro.log", deployed["env"], args=("--backend", "docker", "--read-only")).start()
    try:
        # Regression: a gateway that stops leaves the worker containers running for the next one.
        assert gw.call("multi-tool", "add", a=2, b=5).json() == {"result": 7}
        client = docker.DockerClient(base_url=docker_host)
        container = next(c for c in client.containers.list(filters={"label": "io.tooldock.namespace=multi-tool"})
                         if c.name.startswith("tooldock-multi-tool-"))
        container.kill()
        gw.wait_for(lambda: gw.namespace("multi-tool")["state"] != "ready", what="the read-only gateway to notice")
        time.sleep(2)
        container.reload()
        assert container.status == "exited"
        assert gw.call("multi-tool", "add", a=1, b=1).status_code in (500, 503)
        assert gw.call("basic-tool", "say_hello").status_code == 200
    finally:
        gw.stop()


def test_a_stopped_container_still_lists_its_resources_and_prompts_from_its_labels(docker_gateway, docker_host, tmp_path):
    """The gateway lists a worker container's resources, templates and prompts from the image's
    `io.tooldock.surface` label until the worker connects, as it lists its tools: a read-only gateway that
    finds the container stopped still shows them. Runs after the module's managing gateway has stopped."""
    import docker
    from test_build import DOCS

    docker_gateway.stop()  # (already stopped by the read-only test; it would restart the container)
    (tmp_path / "src" / "docs").mkdir(parents=True)
    (tmp_path / "src" / "docs" / "docs.py").write_text(DOCS)
    sockets = Path(tempfile.mkdtemp(prefix="tds-"))
    env = {"DOCKER_HOST": docker_host, "TOOLDOCK_SOCKET_DIR": str(sockets)}
    deployed = json.loads(tooldock_cli("deploy", str(tmp_path / "src" / "docs"), "--json", env=env).stdout)
    client = docker.DockerClient(base_url=docker_host)
    container = client.containers.get(deployed["container"])
    try:
        container.stop(timeout=5)
        (tmp_path / "empty").mkdir()
        gw = Gateway(tmp_path / "empty", tmp_path / "ro.log", env, args=("--backend", "docker", "--read-only")).start()
        try:
            assert gw.namespace("docs")["state"] != "ready"  # nothing connected: only the labels speak

            async def body(session):
                resources = [str(r.uri) for r in (await session.list_resources()).resources]
                templates = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
                prompts = [p.name for p in (await session.list_prompts()).prompts]
                return resources, templates, prompts

            assert run_mcp(gw, "docs", body) == (["docs://readme"], ["docs://pages/{page}"], ["summarize"])
        finally:
            gw.stop()
    finally:
        container.remove(force=True)
