"""ToolDock on Docker Swarm, on a real one-node swarm (swarmkit.py: the test engine after `docker swarm
init`) and a loopback docker-registry: `tooldock swarm up` on a small copy of the examples (basic-tool,
multi-tool with 2 replicas, and `vault`, which declares a secret), then, in order on that one stack:

- REST and MCP (the official SDK client) through the published port;
- the workers' hardening and networks as `docker service inspect` shows them; the secret's value reaches
  vault's tasks only and shows in no `docker service inspect` nor task log;
- a worker task killed: Swarm replaces it and calls go on;
- a gateway task killed: the MCP session goes on through the other gateway (sessions are in Redis);
- an edit of one namespace and `swarm up` again under a steady load: only that namespace rolls out, with
  no failed call;
- signed-only mode (TOOLDOCK_REQUIRE_SIGNED_BY): every `swarm up` here signs what it pushes (`--sign-key`) and
  passes the check; one whose namespace images are not signed by the required key is refused before the
  swarm is touched;
- `tooldock swarm down --volumes` leaves no service, container, network, secret, config or volume.

The stack file itself (`swarm render`'s output for a fixed plan) is compared with tests/expected/swarm/.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import BUILD_CACHE, EXAMPLES, TOOLDOCK
from swarmkit import docker, own_engine, publish_mode, swarm_up

from tooldock.swarm.stack import NamespacePlan, StackPlan, render

EXPECTED = Path(__file__).parent / "expected" / "swarm"
SECRET_VALUE = "swarm-vault-secret-5f4e3d2c1b0a"
STACK = f"tds{os.getpid() % 10000}"
VAULT_TOOL = '''import hashlib
import os

from fastmcp.tools import tool


@tool
def token_digest() -> str:
    """The SHA-256 of VAULT_TOKEN as this worker got it."""
    return hashlib.sha256(os.environ.get("VAULT_TOKEN", "").encode()).hexdigest()
'''
SETUID_PROBE = (
    "import os, stat; print([os.path.join(d, f) for d, _, fs in os.walk('/', onerror=None) if not d.startswith("
    "('/proc', '/sys')) for f in fs if os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, "
    "f)) and os.stat(os.path.join(d, f)).st_mode & (stat.S_ISUID | stat.S_ISGID)])"
)
VERSION_TOOL = '''from fastmcp.tools import tool


@tool
def version() -> str:
    """Which edit of the namespace answers."""
    return "v2"
'''


def fixed_plan(publish: str = "edge") -> StackPlan:
    tls = ("s_tls-gateway-cert_0", "s_tls-gateway-key_0", "s_tls-gateway-trust_0")
    return StackPlan(
        gateway_image="reg:5000/tooldock/tooldock-gateway@sha256:" + "a" * 64,
        redis_image="reg:5000/tooldock/tooldock-redis@sha256:" + "b" * 64,
        port=8000,
        replicas=2,
        secrets={"bearer": "s_bearer_0", "redis_conf": "s_redis_conf_0", "state_url": "s_state_url_0",
                 "state_key": "s_state_key_0"},
        gateway_tls=tls,
        namespaces=(
            NamespacePlan("hello", "reg:5000/tooldock/hello@sha256:" + "c" * 64, 1, "none", None, None, (),
                          ("s_w-hello-cert_0", "s_w-hello-key_0", "s_w-hello-trust_0")),
            NamespacePlan("github", "reg:5000/tooldock/github@sha256:" + "d" * 64, 3, "egress", "512m", 0.5,
                          (("GITHUB_TOKEN", "s_ns-github-GITHUB_TOKEN_0"),),
                          ("s_w-github-cert_0", "s_w-github-key_0", "s_w-github-trust_0")),
        ),
        publish=publish,  # type: ignore[arg-type]
        edge_image="reg:5000/tooldock/tooldock-haproxy@sha256:" + "e" * 64 if publish == "edge" else "",
        edge_config="s_haproxy-cfg_0" if publish == "edge" else "",
        labels={"io.tooldock.stack": "s"},
    )


@pytest.mark.parametrize("publish", ["edge", "mesh"])
def test_rendered_stack_file_is_the_stored_one(publish: str) -> None:
    text = render(fixed_plan(publish), "s")
    expected = EXPECTED / f"stack-{publish}.yml"
    if os.environ.get("TOOLDOCK_UPDATE_EXPECTED") == "1":
        expected.write_text(text)
    assert text == expected.read_text(), f"the stack file changed; TOOLDOCK_UPDATE_EXPECTED=1 rewrites {expected}"
    document = yaml.safe_load(text)
    services = document["services"]
    for name, service in services.items():
        assert "@sha256:" in service["image"], name
        assert service["user"] == "65532:65532" and service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"], name
    assert services["ns-github"]["networks"] == ["workers", "egress"]
    assert services["ns-hello"]["networks"] == ["workers"]
    assert document["networks"]["workers"]["internal"] is True and document["networks"]["state"]["internal"]
    assert services["ns-github"]["deploy"]["resources"]["limits"] == {"memory": "512m", "cpus": "0.5"}
    assert services["ns-github"]["deploy"]["update_config"]["order"] == "start-first"
    assert [s["target"] for s in services["ns-github"]["secrets"]][-1] == "ns/GITHUB_TOKEN"
    assert not any(s["target"].startswith("ns/") for s in services["ns-hello"]["secrets"])
    assert services["gateway"]["environment"]["TOOLDOCK_WORKERS"] == (
        "hello=tls://tasks.ns-hello:7700,github=tls://tasks.ns-github:7700"
    )
    assert all(v.get("external") for v in document["secrets"].values())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Stack:
    def __init__(self, host: str, tools: Path, registry: str, state: Path, store: Path, port: int) -> None:
        self.host, self.tools, self.registry, self.state, self.port = host, tools, registry, state, port
        self.url = f"http://127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "DOCKER_HOST": host,
            "TOOLDOCK_CACHE_DIR": str(BUILD_CACHE),
            "TOOLDOCK_SECRETS_DIR": str(store),
            "TOOLDOCK_AGE_KEY_FILE": str(store / "age.key"),
            "TOOLDOCK_SIGNING_PASSWORD": "swarm signing",
            "TOOLDOCK_REQUIRE_SIGNED_BY": str(state.parent / "keys" / "ci.pub"),
        }
        self.keys = state.parent / "keys"
        self.env.pop("TOOLDOCK_BEARER_TOKEN", None)
        self.token = ""

    def cli(self, *args: str, check: bool = True, timeout: float = 900,
            **env: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([TOOLDOCK, "swarm", *args], env={**self.env, **env}, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"tooldock swarm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")
        return proc

    def up(self, *extra: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        return self.cli("up", str(self.tools), "--registry", self.registry, "--replicas", "2", "--port",
                        str(self.port), "--publish", publish_mode(), "--stack", STACK, "--state-dir",
                        str(self.state), "--timeout", "400", "--json", *extra, check=check, **env)

    def signed_up(self) -> subprocess.CompletedProcess[str]:
        """`swarm up --sign-key` in signed-only mode (TOOLDOCK_REQUIRE_SIGNED_BY=ci.pub, in self.env)."""
        return self.up("--sign-key", str(self.keys / "ci.key"))

    def headers(self, namespace: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **({"X-Namespace": namespace} if namespace else {})}

    def call(self, namespace: str, tool: str, timeout: float = 30, **arguments: Any) -> httpx.Response:
        return httpx.post(f"{self.url}/tools/{tool}", headers=self.headers(namespace), json=arguments,
                          timeout=timeout)

    def answer(self, namespace: str, tool: str, wait: float = 120, **arguments: Any) -> Any:
        deadline, last = time.monotonic() + wait, None
        while time.monotonic() < deadline:
            try:
                last = self.call(namespace, tool, **arguments)
                if last.status_code == 200:
                    return last.json()["result"]
            except httpx.HTTPError as exc:
                last = exc
            time.sleep(0.5)
        raise AssertionError(f"{namespace}/{tool} did not answer: {last!r} {getattr(last, 'text', '')}")

    def docker(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return docker(self.host, *args, check=check)

    def containers(self, service: str) -> list[str]:
        out = self.docker("ps", "-q", "--filter", f"label=com.docker.swarm.service.name={STACK}_{service}").stdout
        return out.split()

    def logs(self, service: str) -> str:
        return self.docker("service", "logs", "--raw", f"{STACK}_{service}", check=False).stdout


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.geteuid() == 0 and shutil.which("dockerd"):
        yield from own_engine(tmp_path_factory.mktemp("swarm-engine"))
        return
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if docker(host, "version", check=False).returncode != 0:
        pytest.fail("CI must provide a Docker engine") if os.environ.get("CI") == "true" else pytest.skip(
            "needs root (a dockerd of its own) or a Docker engine at DOCKER_HOST")
    yield host


@pytest.fixture(scope="module")
def stack(engine: str, registry: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    from tooldock.builder.cosignkey import generate, public_pem
    from tooldock.secrets.store import SecretStore

    for host in swarm_up(engine):
        root = tmp_path_factory.mktemp("swarm")
        tools = root / "tools"
        for name in ("basic-tool", "multi-tool"):
            shutil.copytree(EXAMPLES / name, tools / name, ignore=shutil.ignore_patterns("__pycache__"))
        (tools / "multi-tool" / "tooldock.yaml").write_text("replicas: 2\nlimits: {memory: 192m, cpus: 0.5}\n")
        (tools / "vault").mkdir()
        (tools / "vault" / "vault.py").write_text(VAULT_TOOL)
        (tools / "vault" / "tooldock.yaml").write_text("secrets: [VAULT_TOKEN]\n")
        store = root / "store"
        secrets = SecretStore(store, store / "age.key")
        secrets.init()
        secrets.set("VAULT_TOKEN", SECRET_VALUE, namespace="vault")
        stack = Stack(host, tools, registry, root / "state", store, _free_port())
        subprocess.run([TOOLDOCK, "keygen", str(stack.keys / "ci")], env=stack.env, check=True, capture_output=True)
        other = generate()  # a key whose signatures the stack's images do not carry
        (stack.keys / "other.pub").write_bytes(public_pem(other))
        started = time.monotonic()
        try:
            up = stack.signed_up()
            print(f"\ntooldock swarm up ({publish_mode()}): {time.monotonic() - started:.1f}s")
            token_lines = [line for line in up.stdout.splitlines() if line.startswith("token: ")]
            assert len(token_lines) == 1, up.stdout
            stack.token = token_lines[0].removeprefix("token: ")
            result = json.loads(up.stdout.splitlines()[-1])
            assert result["url"] == stack.url and all(s["ready"] for s in result["services"]), result
            assert "signed-only mode: 3 namespace image(s) signed" in up.stderr, up.stderr
            yield stack
        finally:
            stack.cli("down", "--stack", STACK, "--state-dir", str(root / "state"), "--volumes", check=False)


def test_rest_and_mcp_through_the_published_port(stack: Stack) -> None:
    assert stack.answer("multi-tool", "add", a=2, b=3) == 5
    assert "Hello" in str(stack.answer("basic-tool", "say_hello", name="swarm"))
    assert httpx.get(f"{stack.url}/tools", headers=stack.headers("basic-tool"), timeout=10).status_code == 200
    assert httpx.post(f"{stack.url}/tools/add", headers={"X-Namespace": "multi-tool"}, json={"a": 1, "b": 1},
                      timeout=10).status_code == 401

    async def body(session: Any) -> tuple[list[str], Any]:
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        result = await session.call_tool("multiply", {"a": 6, "b": 7})
        return tools, result.structured_content

    tools, out = _mcp(stack, "multi-tool", body)
    assert "add" in tools and "multiply" in tools
    assert out in ({"result": 42.0}, {"result": 42})
    status = stack.cli("status", "--stack", STACK, "--json").stdout.splitlines()
    assert {json.loads(line)["service"] for line in status} >= {f"{STACK}_gateway", f"{STACK}_ns-vault"}


def _mcp(stack: Stack, namespace: str, body: Any) -> Any:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        async with httpx2.AsyncClient(headers=stack.headers(namespace), timeout=60) as http:
            async with streamable_http_client(f"{stack.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return asyncio.run(main())


def test_workers_are_hardened_and_the_secret_reaches_its_namespace_only(stack: Stack) -> None:
    assert stack.answer("vault", "token_digest") == hashlib.sha256(SECRET_VALUE.encode()).hexdigest()
    inspected = stack.docker("service", "inspect", *(f"{STACK}_{s}" for s in
                             ("gateway", "redis", "ns-vault", "ns-multi-tool", "ns-basic-tool"))).stdout
    assert SECRET_VALUE not in inspected and stack.token not in inspected
    specs = {s["Spec"]["Name"].removeprefix(f"{STACK}_"): s["Spec"] for s in json.loads(inspected)}
    for name in ("ns-vault", "ns-multi-tool", "ns-basic-tool"):
        container = specs[name]["TaskTemplate"]["ContainerSpec"]
        assert container["User"] == "65532:65532" and container["ReadOnly"] is True, name
        assert container["CapabilityDrop"] == ["ALL"], name
        assert "@sha256:" in container["Image"]
        # no set-uid or set-gid file in the image: what no-new-privileges would guard against (Swarm has no such
        # setting on this engine; every capability is dropped anyway)
        found = stack.docker("run", "--rm", "--network", "none", "--user", "65532:65532", "--entrypoint",
                             "/usr/bin/python3", container["Image"], "-c", SETUID_PROBE).stdout
        assert found.strip() == "[]", (name, found)
        mounted = [s["File"]["Name"] for s in container.get("Secrets", [])]
        assert ("ns/VAULT_TOKEN" in mounted) == (name == "ns-vault"), (name, mounted)
    limits = specs["ns-multi-tool"]["TaskTemplate"]["Resources"]["Limits"]
    assert limits["MemoryBytes"] == 192 * 1024 * 1024 and limits["NanoCPUs"] == 500_000_000
    assert specs["ns-multi-tool"]["Mode"]["Replicated"]["Replicas"] == 2
    networks = json.loads(stack.docker("network", "inspect", f"{STACK}_workers").stdout)[0]
    assert networks["Internal"] is True
    for name in ("ns-vault", "gateway", "redis"):
        assert SECRET_VALUE not in stack.logs(name)
    assert stack.token not in stack.logs("gateway")


def test_a_killed_worker_task_is_replaced(stack: Stack) -> None:
    before = stack.containers("ns-multi-tool")
    assert len(before) == 2
    stack.docker("kill", before[0])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = stack.containers("ns-multi-tool")
        state = stack.cli("status", "--stack", STACK, "--json").stdout
        ready = [json.loads(line) for line in state.splitlines()]
        if before[0] not in now and len(now) == 2 and all(s["ready"] for s in ready):
            break
        time.sleep(1)
    else:
        raise AssertionError(f"the killed task was not replaced: {stack.containers('ns-multi-tool')}")
    for _ in range(10):
        assert stack.answer("multi-tool", "add", wait=30, a=1, b=2) == 3


def test_a_killed_gateway_task_loses_no_session(stack: Stack) -> None:
    gateways = stack.containers("gateway")
    assert len(gateways) == 2

    async def body(session: Any) -> list[Any]:
        seen = [(await session.call_tool("add", {"a": i, "b": 1})).structured_content for i in range(6)]
        stack.docker("kill", gateways[0])
        await asyncio.sleep(3)  # the edge's health check (every second) takes the dead task out
        seen += [(await session.call_tool("add", {"a": i, "b": 1})).structured_content for i in range(6)]
        return seen

    seen = _mcp(stack, "multi-tool", body)
    assert [s["result"] for s in seen] == [i + 1 for i in range(6)] * 2


def test_a_rolling_update_under_load_fails_no_call_and_touches_one_namespace(stack: Stack) -> None:
    (stack.tools / "multi-tool" / "version.py").write_text(VERSION_TOOL)
    before = {s: stack.containers(s) for s in ("ns-basic-tool", "ns-vault", "redis")}
    calls, failures, stop = [0], [], threading.Event()

    def load() -> None:
        with httpx.Client(headers=stack.headers("multi-tool"), timeout=30) as client:
            while not stop.is_set():
                try:
                    response = client.post(f"{stack.url}/tools/add", json={"a": 1, "b": 1})
                    if response.status_code != 200:
                        failures.append(f"{time.strftime('%H:%M:%S')} {response.status_code} {response.text[:200]}")
                except httpx.HTTPError as exc:
                    failures.append(f"{time.strftime('%H:%M:%S')} {exc!r}")
                calls[0] += 1
                time.sleep(0.05)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        started = time.monotonic()
        up = stack.signed_up()
        took = time.monotonic() - started
        time.sleep(3)  # the old tasks drain after the command returned
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    print(f"\nrolling update: {took:.1f}s, {calls[0]} calls, {len(failures)} failed")
    rolled = [line.split()[1] for line in up.stderr.splitlines() if "rolling out" in line]
    # the namespaces: only the edited one (the gateway's image changes only when ToolDock's source did)
    assert [n for n in rolled if n.startswith("ns-")] == ["ns-multi-tool:"], up.stderr
    assert failures == [], f"{len(failures)} failed: {failures[:3]} ... {failures[-3:]}\n{up.stderr}"
    assert calls[0] > 20
    assert stack.answer("multi-tool", "version") == "v2"
    for service, containers in before.items():  # nothing else was restarted
        assert stack.containers(service) == containers, service


def test_signed_only_mode_refuses_images_not_signed_by_the_keys_before_touching_the_swarm(stack: Stack) -> None:
    """`swarm up` with TOOLDOCK_REQUIRE_SIGNED_BY naming a key that signed none of the images, and no --sign-key:
    refused with the image named, the services as they were. The images `swarm up --sign-key` pushed carry
    cosign signatures by the stack's key (checked by `tooldock verify`), the gateway's too."""
    def versions() -> dict[str, int]:
        listed = stack.docker("service", "ls", "-q", "--filter", f"label=com.docker.stack.namespace={STACK}")
        inspected = json.loads(stack.docker("service", "inspect", *listed.stdout.split()).stdout)
        return {s["Spec"]["Name"]: s["Version"]["Index"] for s in inspected}

    before = versions()
    refused = stack.up(check=False, TOOLDOCK_REQUIRE_SIGNED_BY=str(stack.keys / "other.pub"))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "refusing to run image" in refused.stderr and "no valid signature" in refused.stderr
    assert f"{stack.registry}/tooldock/basic-tool@sha256:" in refused.stderr  # the first namespace's image
    assert "--sign-key KEY.key" in refused.stderr and "Nothing was deployed" in refused.stderr
    assert "docker stack deploy" not in refused.stderr and versions() == before
    gateway = json.loads(stack.docker("service", "inspect", f"{STACK}_gateway").stdout)[0]
    image = gateway["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"]
    verified = subprocess.run([TOOLDOCK, "verify", image, "--key", str(stack.keys / "ci.pub"), "--json"],
                              env=stack.env, capture_output=True, text=True)
    assert verified.returncode == 0 and json.loads(verified.stdout)["digest"] == image.split("@")[1], verified.stderr


def test_render_writes_the_stack_that_runs(stack: Stack) -> None:
    out = stack.state.parent / "rendered.yml"
    stack.cli("render", str(stack.tools), "--registry", stack.registry, "--replicas", "2", "--port", str(stack.port),
              "--publish", publish_mode(), "--stack", STACK, "--state-dir", str(stack.state), "-o", str(out))
    rendered = yaml.safe_load(out.read_text())["services"]
    running = json.loads(stack.docker("service", "inspect", *(f"{STACK}_{name}" for name in rendered)).stdout)
    images = {s["Spec"]["Name"].removeprefix(f"{STACK}_"): s["Spec"]["TaskTemplate"]["ContainerSpec"]["Image"]
              for s in running}
    assert images == {name: service["image"] for name, service in rendered.items()}
    assert SECRET_VALUE not in out.read_text() and stack.token not in out.read_text()


def test_down_leaves_nothing_behind(stack: Stack) -> None:
    stack.cli("down", "--stack", STACK, "--state-dir", str(stack.state), "--volumes")
    label = f"label=com.docker.stack.namespace={STACK}"
    assert stack.docker("service", "ls", "-q", "--filter", label).stdout.strip() == ""
    assert stack.docker("ps", "-aq", "--filter", label).stdout.strip() == ""
    assert stack.docker("network", "ls", "-q", "--filter", label).stdout.strip() == ""
    assert stack.docker("volume", "ls", "-q", "--filter", label).stdout.strip() == ""
    own = f"label=io.tooldock.stack={STACK}"
    assert stack.docker("secret", "ls", "-q", "--filter", own).stdout.strip() == ""
    assert stack.docker("config", "ls", "-q", "--filter", own).stdout.strip() == ""


@pytest.mark.parametrize("args, message", [
    (["--registry", "not a registry"], "HOST:PORT of the registry"),
    (["--registry", "127.0.0.1:5000", "--stack", "Bad Name"], "lower-case letters"),
    (["--registry", "127.0.0.1:5000", "--replicas", "0"], "0 is not in the range"),
])
def test_bad_input_is_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "hello").mkdir()
    proc = subprocess.run([TOOLDOCK, "swarm", "up", str(tmp_path), *args], capture_output=True, text=True)
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_tools_dir_without_namespaces_is_a_message(tmp_path: Path) -> None:
    proc = subprocess.run([TOOLDOCK, "swarm", "render", str(tmp_path), "--registry", "127.0.0.1:5000"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "has no namespace folders" in proc.stderr and "Traceback" not in proc.stderr
