"""The manager on the docker backend, driven the way an LLM drives it: `tooldock serve TOOLS --backend docker
--manager` against a real Docker engine, the official MCP SDK client for the manager, REST clients for the
gateway. The namespace is created and written through the manager; `reload_core` builds it with the
daemonless builder (nothing is pulled: the builder makes its own base), loads it, deploys it as a worker
container (--network none) and the gateway serves it.

- An edit + `reload_core` while 8 clients call the tool: no call fails, a new digest is reported, every
  call that starts after `reload_core` returns gets the new value.
- `reload_core` with nothing changed deploys nothing, also for a namespace asleep after its `idle_timeout`.
- A bad edit that fails the build (an import that fails at module top) and one that builds but dies as
  its container starts: each is reported under `failed` with its reason, the old container keeps serving
  (2 clients call it throughout with no failure), and a good edit afterwards is deployed as usual.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import BUILD_CACHE, MANAGER_ARGS, TOKEN, Gateway, manager_url, run_manager, tooldock_cli

pytestmark = pytest.mark.slow


def greeter(version: str) -> str:
    return f'''"""Greetings, versioned."""
from fastmcp.tools import tool


@tool
def greet(name: str) -> str:
    """Greet someone, saying which version answered.

    Args:
        name: Who to greet.
    """
    return "{version}: hello " + name
'''


# Passes write_tool's static validation (valid Python, @tool, hints, docstring) but cannot be imported.
FAILS_AT_IMPORT = "import nonexistent_pkg_xyz  # no such package\n\n" + greeter("broken")
# Builds (the builder's schema extraction imports it fine) but dies as soon as its container starts.
DIES_IN_CONTAINER = greeter("never").replace(
    "from fastmcp.tools import tool\n",
    "import os\n\nfrom fastmcp.tools import tool\n\nif os.environ.get('TOOLDOCK_APP_DIR'):\n    os._exit(3)\n",
)


class Pair:
    """A docker-backend gateway with its manager, and the docker env to clean up with."""

    def __init__(self, gateway: Gateway, url: str, env: dict[str, str]) -> None:
        self.gateway, self.url, self.env = gateway, url, env

    def manager(self, *steps: tuple[str, dict[str, Any]]) -> list[tuple[bool, Any]]:
        """Call the manager's tools in order, in one MCP session."""

        async def body(call: Any) -> list[tuple[bool, Any]]:
            return [await call(tool, **args) for tool, args in steps]

        try:
            results: list[tuple[bool, Any]] = run_manager(self.url, body)
        except Exception as exc:  # the manager is unreachable: its log (in the gateway's) says why
            raise AssertionError(f"manager session failed: {exc!r}\n{self.gateway.logs[-5000:]}") from exc
        return results

    def workers(self, namespace: str) -> list[dict[str, Any]]:
        """`tooldock ps --json`, this namespace's rows."""
        rows = map(json.loads, tooldock_cli("ps", "--json", env=self.env).stdout.splitlines())
        return [row for row in rows if row["namespace"] == namespace]

    def greet(self, namespace: str) -> Any:
        reply = self.gateway.call(namespace, "greet", name="Ada")
        return reply.json().get("result") if reply.status_code == 200 else reply.status_code


@pytest.fixture
def docker_pair(docker_host: str, make_gateway: Any) -> Iterator[Pair]:
    import docker

    sockets = Path(tempfile.mkdtemp(prefix="tdmd-"))  # short: unix socket paths are limited
    env = {
        "DOCKER_HOST": docker_host,
        "TOOLDOCK_SOCKET_DIR": str(sockets),
        "TOOLDOCK_CACHE_DIR": str(BUILD_CACHE),  # the builder's cache (base image and layers), shared by tests
        "TOOLDOCK_DRAIN_TIMEOUT": "10",
        "MANAGER_INTERNAL_TOKEN": "manager-token-docker-0123",
    }
    gateway = make_gateway(env=env, args=("--backend", "docker", *MANAGER_ARGS))  # an empty tools folder
    pair = Pair(gateway, manager_url(gateway), env)
    yield pair
    gateway.stop()  # first: a managing gateway would act on the containers removed below
    for namespace in [p.name for p in gateway.tools_dir.iterdir() if p.is_dir()]:
        tooldock_cli("stop", namespace, env=env, check=False)
    client = docker.DockerClient(base_url=docker_host)
    for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"}, ignore_removed=True):
        if any(str(m.get("Source", "")).startswith(str(sockets)) for m in container.attrs.get("Mounts") or []):
            container.remove(force=True)
    shutil.rmtree(sockets, ignore_errors=True)


class Load:
    """`clients` threads calling `greet` through the gateway's REST until stopped (at most 240 s and
    `cap` calls in all). Each outcome: (start time, status, result)."""

    def __init__(self, gateway: Gateway, namespace: str, clients: int, cap: int = 40_000) -> None:
        self.gateway, self.namespace, self.cap = gateway, namespace, cap
        self.outcomes: list[tuple[float, int, Any]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self.client) for _ in range(clients)]

    def client(self) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": self.namespace}
        deadline = time.monotonic() + 240
        with httpx.Client(headers=headers, timeout=60) as http:
            while not self.stopped.is_set() and time.monotonic() < deadline and len(self.outcomes) < self.cap:
                started = time.monotonic()
                try:
                    reply = http.post(f"{self.gateway.url}/tools/greet", json={"name": "Ada"})
                    outcome = (started, reply.status_code, reply.json())
                except (httpx.HTTPError, ValueError) as exc:
                    outcome = (started, -1, repr(exc))
                with self.lock:
                    self.outcomes.append(outcome)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(90)

    def failures(self) -> list[tuple[float, int, Any]]:
        return [o for o in self.outcomes if o[1] != 200]

    def results(self, after: float = 0.0) -> list[Any]:
        return [body.get("result") for started, status, body in self.outcomes if started > after and status == 200]


def test_edit_and_reload_core_swap_the_container_under_8_clients(docker_pair: Pair) -> None:
    pair, ns = docker_pair, "mgrswap"
    (created, _), (wrote, written), (reload_error, first) = pair.manager(
        ("create_namespace", {"name": ns}),
        ("write_tool", {"namespace": ns, "filename": "greet.py", "code": greeter("v1")}),
        ("reload_core", {}),
    )
    assert created is False and wrote is False and written["written"] is True, written
    assert reload_error is False and first["failed"] == {}, (first, pair.gateway.logs[-3000:])
    digest_v1 = first["images_built"][ns]
    assert digest_v1.startswith("sha256:") and len(digest_v1) == 71
    assert pair.greet(ns) == "v1: hello Ada"  # reload_core returns once the new container serves
    assert pair.manager(("test_tool", {"namespace": ns, "tool_name": "greet", "input": {"name": "Bo"}}))[0] == (
        False,
        {"success": True, "result": "v1: hello Bo"},
    )

    with Load(pair.gateway, ns, clients=8) as load:
        time.sleep(1)  # calls on v1 first
        started = time.monotonic()
        (_, rewritten), (reload_error, second) = pair.manager(
            ("write_tool", {"namespace": ns, "filename": "greet.py", "code": greeter("v2")}),
            ("reload_core", {}),
        )
        reloaded = time.monotonic()
        time.sleep(1.5)  # a tail of calls after the reload
    print(
        f"\ndocker reload_core after a one-file edit: {reloaded - started:.2f}s, "
        f"{len(load.outcomes)} calls by 8 clients, {len(load.failures())} failed"
    )

    assert rewritten["written"] is True
    assert reload_error is False and second["failed"] == {}, second
    digest_v2 = second["images_built"][ns]
    assert digest_v2.startswith("sha256:") and digest_v2 != digest_v1
    failures = load.failures()
    assert len(load.outcomes) > 100 and failures == [], f"{len(failures)}/{len(load.outcomes)} failed: {failures[:5]}"
    assert set(load.results()) == {"v1: hello Ada", "v2: hello Ada"}
    after = load.results(after=reloaded)
    assert len(after) > 10 and set(after) == {"v2: hello Ada"}
    assert pair.greet(ns) == "v2: hello Ada"
    # One container serves the namespace: the old generation was drained and removed.
    rows = pair.workers(ns)
    assert [(r["generation"], r["status"]) for r in rows] == [(2, "running")], rows


def test_write_tool_names_the_hosts_a_container_without_network_cannot_reach(docker_pair: Pair) -> None:
    pair, ns = docker_pair, "mgrnet"
    calls = greeter("net").replace('"net: hello " + name', '"https://api.openweathermap.org/data/2.5/weather?q=" + name')
    (_, _), (wrote, written) = pair.manager(
        ("create_namespace", {"name": ns}),
        ("write_tool", {"namespace": ns, "filename": "weather.py", "code": calls}),
    )
    assert wrote is False and written["written"] is True and written["no_network_for"] == ["api.openweathermap.org"]
    assert f"add `network: egress` to {ns}/tooldock.yaml" in written["next_steps"][0]


def test_a_bad_edit_is_reported_and_the_old_container_keeps_serving(docker_pair: Pair) -> None:
    pair, ns = docker_pair, "mgrbad"
    *_, (reload_error, first) = pair.manager(
        ("create_namespace", {"name": ns}),
        ("write_tool", {"namespace": ns, "filename": "greet.py", "code": greeter("v1")}),
        ("reload_core", {}),
    )
    assert reload_error is False and first["failed"] == {}, (first, pair.gateway.logs[-3000:])
    assert first["images_built"][ns].startswith("sha256:")
    assert pair.greet(ns) == "v1: hello Ada"

    with Load(pair.gateway, ns, clients=2) as load:
        # 1. Fails the build: the import at module top raises when the builder extracts the schemas.
        (_, written), (reload_error, broken) = pair.manager(
            ("write_tool", {"namespace": ns, "filename": "greet.py", "code": FAILS_AT_IMPORT}),
            ("reload_core", {}),
        )
        assert written["written"] is True, written  # static validation cannot see it
        assert reload_error is False and ns in broken["failed"], broken
        assert ns not in broken["images_built"]
        reason = broken["failed"][ns]
        assert "nonexistent_pkg_xyz" in reason and "previous version keeps serving" in reason, reason
        assert pair.greet(ns) == "v1: hello Ada"

        # 2. Builds, but its container dies at start: deploy removes it, v1 stays.
        (_, written), (reload_error, dies) = pair.manager(
            ("write_tool", {"namespace": ns, "filename": "greet.py", "code": DIES_IN_CONTAINER}),
            ("reload_core", {}),
        )
        assert written["written"] is True, written
        assert reload_error is False and ns in dies["failed"], dies
        assert ns not in dies["images_built"]
        reason = dies["failed"][ns]
        assert "did not become ready" in reason and "previous version keeps serving" in reason, reason
        assert pair.greet(ns) == "v1: hello Ada"
        time.sleep(1)  # calls after the failed start too
    failures = load.failures()
    assert len(load.outcomes) > 20 and failures == [], f"{len(failures)}/{len(load.outcomes)} failed: {failures[:5]}"
    assert set(load.results()) == {"v1: hello Ada"}
    rows = pair.workers(ns)
    assert [(r["generation"], r["status"]) for r in rows] == [(1, "running")], rows

    # 3. A good edit afterwards deploys as usual.
    (_, written), (reload_error, fixed) = pair.manager(
        ("write_tool", {"namespace": ns, "filename": "greet.py", "code": greeter("v3")}),
        ("reload_core", {}),
    )
    assert reload_error is False and fixed["failed"] == {}, fixed
    assert fixed["images_built"][ns] not in (first["images_built"][ns], None)
    assert pair.greet(ns) == "v3: hello Ada"


def test_reload_core_redeploys_nothing_for_an_unchanged_namespace_running_or_asleep(docker_pair: Pair) -> None:
    """Regression: a namespace its `idle_timeout` stopped (its container exited, the namespace sleeping) was
    rebuilt to the same image and redeployed, woken up as a new generation, by every reload_core."""
    import docker

    pair, ns = docker_pair, "mgridle"
    *_, (_, first) = pair.manager(
        ("create_namespace", {"name": ns}),
        ("write_tool", {"namespace": ns, "filename": "greet.py", "code": greeter("v1")}),
        ("reload_core", {}),
    )
    assert first["failed"] == {} and first["images_built"][ns].startswith("sha256:"), first
    ((_, again),) = pair.manager(("reload_core", {}))
    assert again["images_built"] == {} and again["failed"] == {}, again

    (pair.gateway.tools_dir / ns / "tooldock.yaml").write_text("idle_timeout: 1\n")  # the person edits it
    ((_, configured),) = pair.manager(("reload_core", {}))
    assert configured["failed"] == {} and ns in configured["images_built"], configured  # the config is in labels
    assert pair.greet(ns) == "v1: hello Ada"
    client = docker.DockerClient(base_url=pair.env["DOCKER_HOST"])

    def statuses() -> list[tuple[str, str]]:
        found = client.containers.list(all=True, filters={"label": f"io.tooldock.namespace={ns}"}, ignore_removed=True)
        return sorted((str(c.name), str(c.status)) for c in found)

    pair.gateway.wait_for(lambda: statuses() == [(f"tooldock-{ns}-2", "exited")], 60, "the idle container to stop")
    assert pair.gateway.namespace(ns)["state"] == "sleeping"
    ((_, asleep),) = pair.manager(("reload_core", {}))
    assert asleep["images_built"] == {} and asleep["failed"] == {}, asleep
    assert statuses() == [(f"tooldock-{ns}-2", "exited")]  # not woken, no new generation
    assert pair.greet(ns) == "v1: hello Ada"  # the next call wakes it


def test_delete_namespace_keeps_serving_until_reload_core_removes_its_containers(docker_pair: Pair) -> None:
    """Seed 000: the namespace disappears after the next reload. On docker its containers went at once
    (the gateway lost the namespace mid-conversation, before the LLM's reload_core); now reload_core removes
    them, and only those of namespaces delete_namespace deleted."""
    pair, ns = docker_pair, "mgrgone"
    *_, (_, first) = pair.manager(
        ("create_namespace", {"name": ns}),
        ("write_tool", {"namespace": ns, "filename": "greet.py", "code": greeter("v1")}),
        ("reload_core", {}),
    )
    assert first["failed"] == {} and first["containers_removed"] == {}, first
    ((_, deleted),) = pair.manager(("delete_namespace", {"name": ns}))
    assert deleted == {"deleted": True, "name": ns}
    assert pair.greet(ns) == "v1: hello Ada" and [w["status"] for w in pair.workers(ns)] == ["running"]
    ((_, reloaded),) = pair.manager(("reload_core", {}))
    assert reloaded["containers_removed"] == {ns: [f"tooldock-{ns}-1"]}, reloaded
    assert ns in reloaded["removed"] and reloaded["failed"] == {}, reloaded
    assert pair.workers(ns) == [] and pair.greet(ns) == 404
    ((_, again),) = pair.manager(("reload_core", {}))
    assert again["containers_removed"] == {} and again["removed"] == [], again
