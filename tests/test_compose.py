"""ToolDock on one host with Docker Compose, driven the way a person does: the repository's own
docker-compose.yml and .env.example copied to a temporary folder, a .env made from the example (tokens, free
loopback ports, a subnet and project name of this run, the test engine's socket), `tooldock compose up`
(ToolDock's builder makes every image, nothing is pulled; Debian's docker-compose runs the file), then:

- both containers healthy and hardened; no token or age identity in `docker inspect` of any container;
- the example namespaces, deployed by the manager on its first start, answer REST and MCP through the gateway;
- an MCP client on the manager creates a namespace, writes a tool, calls reload_core: the tool answers
  through the gateway within seconds;
- a secret set with `docker-compose run --rm manager tooldock secrets set` reaches its namespace only;
- `tooldock compose down --volumes` leaves no container (workers included), network or volume.

The module's tests share one stack and run in order; the last one takes it down (the fixture does too, on
failure). `tooldock compose init` writing the repository's files needs no engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import BUILD_CACHE, ROOT, TOOLDOCK, require, run_manager, run_mcp

pytestmark = pytest.mark.slow

BEARER = "compose-bearer-token-0123456789abcdef"
MANAGER_TOKEN = "compose-manager-token-0123456789abcdef"
SECRET_VALUE = "compose-secret-value-9f8e7d6c5b4a"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Stack:
    """A compose project of this run: its folder, environment, URLs, and the clients' headers."""

    def __init__(self, folder: Path, env: dict[str, str], project: str, core: int, manager: int, subnet: str) -> None:
        self.folder, self.env, self.project, self.subnet = folder, env, project, subnet
        self.url, self.manager_url = f"http://127.0.0.1:{core}", f"http://127.0.0.1:{manager}"

    def headers(self, namespace: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {BEARER}", **({"X-Namespace": namespace} if namespace else {})}

    def cli(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(args), cwd=self.folder, env=self.env, input=stdin, capture_output=True, text=True,
                              timeout=600)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
                                 f"\n{self.logs()}")
        return proc

    def logs(self) -> str:
        proc = subprocess.run(["docker-compose", "logs", "--no-color", "--tail=60"], cwd=self.folder, env=self.env,
                              capture_output=True, text=True)
        return proc.stdout[-6000:]

    def call(self, namespace: str, tool: str, **arguments: Any) -> httpx.Response:
        return httpx.post(f"{self.url}/tools/{tool}", headers=self.headers(namespace), json=arguments, timeout=60)

    def answer(self, namespace: str, tool: str, timeout: float = 120, **arguments: Any) -> Any:
        """The tool's result once it answers 200 through the gateway."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:
                last = self.call(namespace, tool, **arguments)
                if last.status_code == 200:
                    return last.json()["result"]
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.5)
        raise AssertionError(f"{namespace}/{tool} did not answer: {last!r} {getattr(last, 'text', '')}\n{self.logs()}")

    def manager(self, *steps: tuple[str, dict[str, Any]]) -> list[tuple[bool, Any]]:
        async def body(call: Any) -> list[tuple[bool, Any]]:
            return [await call(tool, **args) for tool, args in steps]

        results: list[tuple[bool, Any]] = run_manager(self.manager_url, body, token=BEARER)
        return results

    def containers(self) -> list[Any]:
        import docker

        client = docker.DockerClient(base_url=self.env["DOCKER_HOST"])
        return client.containers.list(all=True, filters={"label": f"com.docker.compose.project={self.project}"})


def _remove_leftovers(stack: Stack) -> None:
    """After `down`, or instead of it when it failed: whatever of the project is still there."""
    import docker

    client = docker.DockerClient(base_url=stack.env["DOCKER_HOST"])
    for container in stack.containers():
        container.remove(force=True)
    for network in client.networks.list(names=[f"{stack.project}_public", f"{stack.project}_internal"]):
        network.remove()
    for volume in client.volumes.list(filters={"name": stack.project}):
        volume.remove(force=True)


@pytest.fixture(scope="module")
def stack(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require("docker-compose")
    if not docker_host.startswith("unix://"):
        pytest.skip("the compose file mounts the Docker socket: DOCKER_HOST must be a unix socket")
    folder = tmp_path_factory.mktemp("compose")
    for name in ("docker-compose.yml", ".env.example"):
        shutil.copy(ROOT / name, folder / name)
    project = f"tdc{os.getpid()}{random.randrange(1000)}"
    core, manager = _free_port(), _free_port()
    subnet = f"172.29.{random.randrange(1, 250)}.0/24"
    values = {
        "BEARER_TOKEN": BEARER,
        "MANAGER_INTERNAL_TOKEN": MANAGER_TOKEN,
        "CORE_PORT": str(core),
        "MANAGER_PORT": str(manager),
        "DOCKER_SOCKET": docker_host.removeprefix("unix://"),
        "TOOLDOCK_INTERNAL_SUBNET": subnet,
        "COMPOSE_PROJECT_NAME": project,
    }
    lines = []
    for line in (folder / ".env.example").read_text().splitlines():
        name = line.partition("=")[0]
        lines.append(f"{name}={values.pop(name)}" if name in values else line)
    (folder / ".env").write_text("\n".join([*lines, *(f"{k}={v}" for k, v in values.items())]) + "\n")
    env = {**os.environ, "DOCKER_HOST": docker_host, "TOOLDOCK_CACHE_DIR": str(BUILD_CACHE)}
    stack = Stack(folder, env, project, core, manager, subnet)
    started = time.monotonic()
    try:
        up = stack.cli(TOOLDOCK, "compose", "up", "--dir", str(folder))
        print(f"\ntooldock compose up: {time.monotonic() - started:.1f}s")
        assert f"gateway: {stack.url}" in up.stdout, up.stdout
        yield stack
    finally:
        stack.cli(TOOLDOCK, "compose", "down", "--volumes", "--dir", str(folder), check=False)
        _remove_leftovers(stack)


def test_compose_init_writes_the_repositorys_files(tmp_path: Path) -> None:
    proc = subprocess.run([TOOLDOCK, "compose", "init", str(tmp_path / "here")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("docker-compose.yml", ".env.example"):
        assert (tmp_path / "here" / name).read_text() == (ROOT / name).read_text(), f"{name} differs"
    (tmp_path / "here" / ".env.example").write_text("# mine\n")
    again = subprocess.run([TOOLDOCK, "compose", "init", str(tmp_path / "here")], capture_output=True, text=True)
    assert again.returncode != 0 and "--force" in again.stderr
    assert (tmp_path / "here" / ".env.example").read_text() == "# mine\n"


def test_env_example_holds_no_working_secret(tmp_path: Path) -> None:
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    proc = subprocess.run([TOOLDOCK, "compose", "up", "--dir", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode != 0 and "set BEARER_TOKEN" in proc.stderr, proc.stderr
    assert not (tmp_path / "secrets").exists()


def test_both_containers_are_healthy_hardened_and_hold_no_secret(stack: Stack) -> None:
    containers = {c.labels["com.docker.compose.service"]: c for c in stack.containers()}
    assert set(containers) == {"gateway", "manager"}
    secret_texts = [BEARER, MANAGER_TOKEN, "AGE-SECRET-KEY", (stack.folder / "secrets" / "age.key").read_text()
                    .splitlines()[-1]]
    for service, container in containers.items():
        attrs, host = container.attrs, container.attrs["HostConfig"]
        assert attrs["State"]["Health"]["Status"] == "healthy", service
        assert attrs["Config"]["User"] == "65532:65532"
        assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"], service
        assert "no-new-privileges:true" in host["SecurityOpt"]
        assert all(b["HostIp"] == "127.0.0.1" for bindings in host["PortBindings"].values() for b in bindings)
        volumes = [m for m in attrs["Mounts"] if m["Type"] == "volume"]
        assert [(m["Name"], m["Destination"]) for m in volumes] == [(f"{stack.project}_tooldock-data",
                                                                     "/var/lib/tooldock")]
        assert {m["Destination"] for m in attrs["Mounts"]} >= {"/run/secrets/bearer_token", "/run/secrets/age_key"}
        assert set(attrs["NetworkSettings"]["Networks"]) == {f"{stack.project}_public", f"{stack.project}_internal"}
        image = container.image
        assert any(t.startswith(f"tooldock/{service}:") for t in image.tags), image.tags  # ours, not pulled
        assert f"io.tooldock.{service}" in image.labels
        inspected = json.dumps(attrs)
        assert not [s for s in secret_texts if s in inspected], f"{service}: a secret in docker inspect"
    env = dict(e.split("=", 1) for e in containers["gateway"].attrs["Config"]["Env"])
    assert env["INTERNAL_ALLOWED_CIDRS"] == stack.subnet
    internal = containers["gateway"].client.networks.get(f"{stack.project}_internal")
    assert internal.attrs["Internal"] is True


def test_the_examples_answer_rest_and_mcp_through_the_gateway(stack: Stack) -> None:
    assert stack.answer("basic-tool", "say_hello", name="Ada") == "Hello, Ada!"
    assert httpx.get(f"{stack.url}/health", timeout=10).status_code == 200

    async def body(session: Any) -> Any:
        tools = await session.list_tools()
        return [t.name for t in tools.tools], await session.call_tool("add", {"a": 2, "b": 3})

    stack.answer("multi-tool", "add", a=1, b=1)
    names, result = run_mcp(stack, "multi-tool", body)  # type: ignore[arg-type]
    assert names == ["add", "multiply", "reverse_text", "word_count"]
    assert result.structured_content == {"result": 5}


GREETER = '''"""A tool written through the manager."""
from fastmcp.tools import tool


@tool
def greet(name: str) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
    """
    return "compose: hello " + name
'''

READS_SECRET = '''"""A tool that says whether its namespace got the secret."""
import hashlib
import os

from fastmcp.tools import tool


@tool
def which() -> str:
    """The SHA-256 of the secret as this worker sees it (the gateway masks the value itself in answers)."""
    value = os.environ.get("COMPOSE_TOKEN")
    return hashlib.sha256(value.encode()).hexdigest() if value else "missing"
'''


def test_a_tool_written_through_the_manager_answers_through_the_gateway(stack: Stack) -> None:
    ns = "composed"
    started = time.monotonic()
    (created, _), (wrote, written), (failed, reloaded) = stack.manager(
        ("create_namespace", {"name": ns}),
        ("write_tool", {"namespace": ns, "filename": "greet.py", "code": GREETER}),
        ("reload_core", {}),
    )
    assert created is False and wrote is False and written["written"] is True, written
    assert failed is False and reloaded["failed"] == {} and ns in reloaded["images_built"], (reloaded, stack.logs())
    answered = stack.answer(ns, "greet", timeout=30, name="Ada")
    took = time.monotonic() - started
    print(f"\nmanager flow (create, write, reload_core, first answer): {took:.1f}s")
    assert answered == "compose: hello Ada"
    assert took < 60


def test_a_secret_set_through_compose_run_reaches_only_its_namespace(stack: Stack) -> None:
    steps: list[tuple[str, dict[str, Any]]] = []
    for ns in ("sec-a", "sec-b"):
        steps += [
            ("create_namespace", {"name": ns}),
            ("write_tool", {"namespace": ns, "filename": "which.py", "code": READS_SECRET}),
            ("prepare_secret", {"key": "COMPOSE_TOKEN", "namespace": ns}),
        ]
    results = stack.manager(*steps)
    assert not [r for r in results if r[0]], results
    proc = stack.cli("docker-compose", "run", "--rm", "-T", "manager", "tooldock", "secrets", "set", "COMPOSE_TOKEN",
                     "--namespace", "sec-a", stdin=SECRET_VALUE)
    assert "COMPOSE_TOKEN set (namespace sec-a)" in proc.stderr, proc.stderr
    ((failed, reloaded),) = stack.manager(("reload_core", {}))
    assert failed is False and "sec-a" in reloaded["images_built"], reloaded
    hashed = hashlib.sha256(SECRET_VALUE.encode()).hexdigest()
    assert stack.answer("sec-a", "which", timeout=30) == hashed
    other = stack.call("sec-b", "which")
    assert hashed not in other.text and SECRET_VALUE not in other.text, other.text
    for container in stack.containers() + _workers(stack):
        assert SECRET_VALUE not in json.dumps(container.attrs), container.name


def _workers(stack: Stack) -> list[Any]:
    import docker

    client = docker.DockerClient(base_url=stack.env["DOCKER_HOST"])
    volume = client.volumes.get(f"{stack.project}_tooldock-data").attrs["Mountpoint"]
    return [c for c in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"})
            if any(str(m.get("Source", "")).startswith(volume) for m in c.attrs.get("Mounts") or [])]


def test_down_volumes_leaves_no_container_network_or_volume(stack: Stack) -> None:
    import docker

    client = docker.DockerClient(base_url=stack.env["DOCKER_HOST"])
    found = _workers(stack)
    assert {"basic-tool", "composed", "sec-a"} <= {c.labels["io.tooldock.namespace"] for c in found}
    workers = {c.name for c in found}
    started = time.monotonic()
    stack.cli(TOOLDOCK, "compose", "down", "--volumes", "--dir", str(stack.folder))
    print(f"\ntooldock compose down --volumes: {time.monotonic() - started:.1f}s")
    assert stack.containers() == []
    left = {c.name for c in client.containers.list(all=True)}
    assert not workers & left, workers & left
    assert not [n.name for n in client.networks.list() if n.name.startswith(f"{stack.project}_")]
    assert not [v.name for v in client.volumes.list() if v.name.startswith(f"{stack.project}_")]
