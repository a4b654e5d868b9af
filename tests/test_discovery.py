"""Discovery by DNS (issue 57, part 2): a namespace's workers are every address a name resolves to.

Real workers listen with mutual TLS on loopback, on one port and several addresses of 127.0.0.0/8, as the
tasks of a Swarm service or the pods of a headless Service do on one port and several IPs. A name with
several A records cannot be made without a DNS server, so most tests give the pool a resolver of their own
(a fake of our `Resolver` protocol) that answers those addresses, and change its answer; one test takes a
real name, `localhost`, through the default resolver (getaddrinfo), in a gateway (`--backend network`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, Gateway
from netkit import NetWorker, cluster_ca, free_port

from tooldock.errors import NamespaceUnavailable, WorkerCrashed
from tooldock.runtime.backends.discovery import SystemResolver, Target
from tooldock.runtime.backends.network import NetworkBackend
from tooldock.runtime.backends.pool import WorkerPool
from tooldock.runtime.settings import Settings, SettingsError
from tooldock.runtime.workerclient import SecretEnv
from tooldock.worker.tls import TLSError, TLSFiles, parse_workers

pytestmark = pytest.mark.slow
NAME = "workers.test"  # only the fake resolver knows it: nothing is looked up on the network
INTERVAL = 0.1


class FakeResolver:
    """Answers what the test says: a list of addresses, or an error (a DNS server that does not answer)."""

    def __init__(self, *addresses: str) -> None:
        self.answer: list[str] | OSError = list(addresses)
        self.asked = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        assert host == NAME
        self.asked += 1
        if isinstance(self.answer, OSError):
            raise self.answer
        return list(self.answer)


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> Path:
    return cluster_ca(tmp_path_factory.mktemp("cluster") / "ca")


@pytest.fixture(scope="module")
def port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def workers(ca, port, tmp_path_factory):
    """Workers of namespace `testing` on 127.0.0.1-3, one port (.1 is the one `localhost` names); one on .6
    serves other tools. They start together, and the tests share them in file order: the drain test lets
    go of .3, which the failover test then kills; the silent-worker test freezes .1 and thaws it."""
    tmp = tmp_path_factory.mktemp("workers")
    started = {
        host: NetWorker(ca / "certs" / "worker", tmp / f"{host}.log", port, host=host, wait=False)
        for host in ("127.0.0.1", "127.0.0.2", "127.0.0.3")
    }
    started["127.0.0.6"] = NetWorker(
        ca / "certs" / "worker",
        tmp / "other.log",
        port,
        host="127.0.0.6",
        folder=FIXTURES / "tools" / "limited",
        wait=False,
    )
    try:
        yield {host: w.ready() for host, w in started.items()}
    finally:
        for w in started.values():  # all at once, then wait for each
            if w.proc.poll() is None:
                w.proc.terminate()
        for w in started.values():
            w.stop()


def _pool(ca: Path, port: int, resolver: FakeResolver, tmp: Path) -> WorkerPool:
    settings = Settings(bearer_token="t" * 20, state_dir=tmp / "state", drain_timeout=10)
    backend = NetworkBackend(
        settings, {"testing": f"tls://{NAME}:{port}"}, TLSFiles(ca / "certs" / "gateway"), INTERVAL, resolver
    )
    source = asyncio.run(backend.discover()).namespaces[0]
    return backend.create(source, SecretEnv())


def _addr(host: str, port: int) -> str:
    return f"tls://{host}:{port}"


def _by_address(pool: WorkerPool) -> dict[str, dict[str, Any]]:
    return {w["address"]: w for w in pool.status()["workers"]}


async def _call(pool: WorkerPool, tool: str, **arguments: Any) -> Any:
    """A tool's value, as REST gives it (`structuredContent`'s `result` for a tool that returns no object)."""
    value = (await pool.call(tool, arguments))["structuredContent"]
    return value["result"] if tool in ("pid", "aslow", "x", "y") else value


async def _until(condition, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


# -- addresses ----------------------------------------------------------------------------------------------


def test_addresses_names_and_literals():
    workers = parse_workers("a=tls://tasks.weather:7700, b=tls://web.tools.svc.cluster.local:7700 c=tls://10.0.0.7:7")
    assert Target.parse(workers["a"]).host == "tasks.weather" and Target.parse(workers["a"]).port == 7700
    assert Target.parse(workers["b"]).is_name
    assert not Target.parse(workers["c"]).is_name and not Target.parse("tls://[::1]:7").is_name
    assert Target.parse("tls://w:7").address("fd00::5") == "tls://[fd00::5]:7"
    with pytest.raises(TLSError, match="neither an IP address nor a DNS name"):
        parse_workers("a=tls://http://x:7")
    with pytest.raises(SettingsError, match="TOOLDOCK_DISCOVERY_INTERVAL='soon'"):
        NetworkBackend.from_env(
            Settings(bearer_token="t" * 20), {"TOOLDOCK_WORKERS": "a=unix:/x", "TOOLDOCK_DISCOVERY_INTERVAL": "soon"}
        )


def test_the_default_resolver_reads_a_real_name():
    assert asyncio.run(SystemResolver().resolve("localhost", 7700)) == ["127.0.0.1"]  # /etc/hosts: no network


# -- spreading, joining, draining -----------------------------------------------------------------------------


def test_calls_spread_over_the_workers_of_a_name(ca, port, workers, tmp_path):
    pool = _pool(ca, port, FakeResolver("127.0.0.2", "127.0.0.3"), tmp_path)

    async def main():
        await pool.start(30)
        await _until(lambda: len(pool._ready()) == 2, "both workers")
        pids = [await _call(pool, "pid") for _ in range(10)]  # one at a time: ties, taken in turn
        calls = [asyncio.ensure_future(_call(pool, "aslow", seconds=0.5)) for _ in range(6)]
        await asyncio.sleep(0.2)
        inflight = sorted(w["inflight"] for w in _by_address(pool).values())
        results = await asyncio.gather(*calls)
        status = pool.status()
        await pool.stop(5)
        return pids, inflight, results, status

    pids, inflight, results, status = asyncio.run(main())
    handshake_pids = {w["pid"] for w in status["workers"]}
    assert set(pids) == handshake_pids and len(handshake_pids) == 2  # each worker's own pid answered
    assert sorted(pids.count(p) for p in handshake_pids) == [5, 5]
    assert inflight == [3, 3]  # six calls at once: fewest in flight, three each
    assert results == ["slept 0.5"] * 6
    assert status["state"] == "ready" and status["discovery"] == {"name": NAME, "interval": INTERVAL}
    assert {w["address"]: w["state"] for w in status["workers"]} == {
        _addr("127.0.0.2", port): "ready",
        _addr("127.0.0.3", port): "ready",
    }
    assert "tools_mismatch" not in status


def test_a_new_address_gets_calls_and_a_gone_one_is_drained(ca, port, workers, tmp_path):
    resolver = FakeResolver("127.0.0.2", "127.0.0.3")
    pool = _pool(ca, port, resolver, tmp_path)
    gone, new = _addr("127.0.0.3", port), _addr("127.0.0.1", port)

    async def main():
        await pool.start(30)
        await _until(lambda: len(pool._ready()) == 2, "both workers")
        slow = [asyncio.ensure_future(_call(pool, "aslow", seconds=1.5)) for _ in range(2)]  # one on each
        await asyncio.sleep(0.2)
        assert _by_address(pool)[gone]["inflight"] == 1
        gone_pid = _by_address(pool)[gone]["pid"]
        resolver.answer = ["127.0.0.2", "127.0.0.1"]  # .3's task went away, .1's came
        await _until(lambda: _by_address(pool).get(new, {}).get("state") == "ready", "the new worker")
        draining = _by_address(pool)[gone]
        pids = [await _call(pool, "pid") for _ in range(6)]
        results = await asyncio.gather(*slow)
        await _until(lambda: gone not in _by_address(pool), "the drained worker let go")
        status = pool.status()
        await pool.stop(5)
        return draining, pids, results, status, gone_pid

    draining, pids, results, status, gone_pid = asyncio.run(main())
    assert draining["state"] == "draining" and draining["inflight"] == 1
    assert results == ["slept 1.5"] * 2  # the call in flight on the drained worker finished
    served = {w["address"]: w["pid"] for w in status["workers"]}
    assert set(served) == {_addr("127.0.0.2", port), new}
    # The new worker got calls (all of them: .2 still ran a slow call, fewest in flight); the gone one none.
    assert served[new] in pids and gone_pid not in pids and set(pids) <= set(served.values())
    assert workers["127.0.0.3"].proc.poll() is None  # let go of, not stopped: it is its orchestrator's


def test_a_killed_worker_fails_over(ca, port, workers, tmp_path):
    """A worker killed under load: the calls it was running fail (the client gets a 500, `internal_error`,
    "the worker for namespace 'testing' exited during the call; ... retry the call"), the connection loss is
    seen at once (the kernel closes a killed process's sockets), and every call made from then on goes to
    the other worker and succeeds."""
    doomed = workers["127.0.0.3"]
    pool = _pool(ca, port, FakeResolver("127.0.0.2", "127.0.0.3"), tmp_path)
    lost = _addr("127.0.0.3", port)
    outcomes: list[tuple[float, str]] = []

    async def client(until: float) -> None:
        while time.monotonic() < until:
            started = time.monotonic()
            try:
                await _call(pool, "aslow", seconds=0.05)
                outcomes.append((started, "ok"))
            except WorkerCrashed as exc:
                outcomes.append((started, exc.message))

    async def main():
        await pool.start(30)
        await _until(lambda: len(pool._ready()) == 2, "both workers")
        until = time.monotonic() + 2.5
        load = [asyncio.ensure_future(client(until)) for _ in range(4)]
        await asyncio.sleep(0.8)
        killed = time.monotonic()
        os.kill(doomed.proc.pid, signal.SIGKILL)
        await _until(lambda: not any(m.address == lost for m in pool._ready()), "the loss seen", 5)
        seen = time.monotonic()
        await asyncio.gather(*load)
        status = pool.status()
        await pool.stop(5)
        return killed, seen, status

    killed, seen, status = asyncio.run(main())
    failed = [(t, why) for t, why in outcomes if why != "ok"]
    assert seen - killed < 1.0
    assert len(failed) <= 4 and all(t < seen for t, _ in failed), failed  # only calls running on it then
    assert all("exited during the call" in why and "retry the call" in why for _, why in failed), failed
    assert sum(1 for t, why in outcomes if t > seen and why == "ok") >= 20  # the load went on, on .2
    assert status["state"] == "ready"
    gone = next(w for w in status["workers"] if w["address"] == lost)
    assert gone["state"] == "restarting" and "cannot reach" in (gone["last_error"] or ""), gone


def test_a_worker_that_stops_answering_is_dropped(ca, port, workers, tmp_path):
    """A worker that goes silent with its connection open (SIGSTOP: as a host gone without a reset): the
    pool pings its idle connections each round; no answer within the ping timeout drops the connection, and
    calls go to the other worker."""
    silent = workers["127.0.0.1"]
    pool = _pool(ca, port, FakeResolver("127.0.0.2", "127.0.0.1"), tmp_path)
    pool.ping_timeout = 0.5
    address = _addr("127.0.0.1", port)

    async def main():
        await pool.start(30)
        await _until(lambda: len(pool._ready()) == 2, "both workers")
        os.kill(silent.proc.pid, signal.SIGSTOP)
        try:
            stopped = time.monotonic()
            await _until(lambda: _by_address(pool)[address]["state"] != "ready", "the silent worker dropped")
            took = time.monotonic() - stopped
            results = [await _call(pool, "echo", value={"n": n}) for n in range(6)]
            dropped = _by_address(pool)[address]
        finally:
            os.kill(silent.proc.pid, signal.SIGCONT)
        await _until(lambda: _by_address(pool)[address]["state"] == "ready", "the worker back", 30)
        await pool.stop(5)
        return took, results, dropped

    took, results, dropped = asyncio.run(main())
    assert took < 5, took
    assert results == [{"n": n} for n in range(6)]
    assert dropped["state"] == "restarting" and dropped["inflight"] == 0


def test_resolver_errors_keep_the_set_and_no_address_is_a_503(ca, port, workers, tmp_path, capfd):
    resolver = FakeResolver("127.0.0.2")
    pool = _pool(ca, port, resolver, tmp_path)

    async def main():
        await pool.start(30)
        await _until(lambda: pool.state == "ready", "the worker")
        resolver.answer = OSError(-3, "Temporary failure in name resolution")
        asked = resolver.asked
        await _until(lambda: resolver.asked >= asked + 5, "five failed lookups")
        kept = (pool.state, await _call(pool, "echo", value={"still": 1}))
        resolver.answer = []  # the service has no task left
        await _until(lambda: pool.state == "failed", "no address")
        try:
            await _call(pool, "echo", value={})
        except NamespaceUnavailable as exc:
            refused = exc
        resolver.answer = ["127.0.0.2"]
        await _until(lambda: pool.state == "ready", "the worker back")
        back = await _call(pool, "echo", value={"back": 1})
        await pool.stop(5)
        return kept, refused, back

    kept, refused, back = asyncio.run(main())
    assert kept == ("ready", {"still": 1})
    assert refused.status == 503 and f"{NAME} resolves to no address" in refused.message
    assert back == {"back": 1}
    err = capfd.readouterr().err
    assert err.count(f"cannot resolve {NAME} (Temporary failure in name resolution); keeping its last 1") == 1
    assert err.count(f"{NAME} resolves to no address") == 1 and f"{NAME} resolves again" in err


def test_workers_serving_other_tools_are_shown(ca, port, workers, tmp_path, capfd):
    resolver = FakeResolver("127.0.0.2")
    pool = _pool(ca, port, resolver, tmp_path)
    first, other = _addr("127.0.0.2", port), _addr("127.0.0.6", port)

    async def main():
        await pool.start(30)
        resolver.answer = ["127.0.0.2", "127.0.0.6"]  # a worker of another image behind the same name
        await _until(lambda: len(pool._ready()) == 2, "both workers")
        await _until(lambda: "serve other tools" in capfd.readouterr().err, "the mismatch logged", 5)
        listed = sorted(t["name"] for t in pool.tools)
        results = await asyncio.gather(*(_call(pool, "echo", value={"n": n}) for n in range(4)))
        status = pool.status()
        await pool.stop(5)
        return listed, results, status

    listed, results, status = asyncio.run(main())
    assert "echo" in listed and "aslow" in listed  # the first worker's tools
    assert results == [{"n": n} for n in range(4)]  # all went to a worker that has `echo`
    assert status["tools_mismatch"] == {"listed_from": first, "workers": [other]}
    digests = {w["address"]: w["tools_digest"] for w in status["workers"]}
    assert digests[first] != digests[other]


# -- a real name, in a gateway --------------------------------------------------------------------------------


def test_a_gateway_finds_its_workers_by_a_real_name(ca, port, workers, tmp_path):
    (tmp_path / "tools").mkdir()
    env = {
        "TOOLDOCK_WORKERS": f"testing=tls://localhost:{port}",
        "TOOLDOCK_TLS_DIR": str(ca / "certs" / "gateway"),
        "TOOLDOCK_DISCOVERY_INTERVAL": "0.5",
    }
    gw = Gateway(tmp_path / "tools", tmp_path / "gw.log", env, ("--backend", "network"))
    try:
        gw.start()
        gw.wait_for(lambda: gw.namespace("testing")["state"] == "ready", 30, "the worker found by name")
        reply = gw.call("testing", "pid")
        assert reply.status_code == 200, reply.text
        listed = gw.namespace("testing")
        assert listed["address"] == f"tls://localhost:{port}"
        assert listed["discovery"] == {"name": "localhost", "interval": 0.5}
        assert [(w["address"], w["state"]) for w in listed["workers"]] == [(_addr("127.0.0.1", port), "ready")]
        assert listed["workers"][0]["pid"] == reply.json()["result"]
    finally:
        gw.stop()


# -- the pool's choices, with members of our own (a fake of pool.Member) ---------------------------------------


class FakeMember:
    def __init__(self, address: str, tools: list[str]) -> None:
        self.address, self.pid, self.state = address, address, "ready"
        self.tools = [{"name": t} for t in tools]
        self.inlined_tools: dict[str, Any] = {}
        self.tool_versions = None
        self.surface: dict[str, Any] = {}
        self.failed_files: list[Any] = []
        self.plain_tools, self.asking_tools = frozenset(tools), None
        self.connected, self.inflight = True, 0

    def has_tool(self, name: str) -> bool:
        return any(t["name"] == name for t in self.tools)

    def listing(self) -> str:
        return ",".join(t["name"] for t in self.tools)

    async def start(self, timeout: float) -> None:
        pass

    async def check(self, timeout: float) -> None:
        pass

    async def stop(self, drain_timeout: float) -> None:
        self.state = "stopped"

    async def call(self, tool: str, arguments: dict[str, Any], relay: Any = None) -> dict[str, Any]:
        return {"structuredContent": {"result": self.address}}

    def status(self) -> dict[str, Any]:
        return {"address": self.address, "state": self.state, "inflight": self.inflight, "restarts": 0}


def test_the_pool_takes_turns_follows_its_tools_and_its_lead(tmp_path):
    members = {n: FakeMember(f"tls://{n}:1", tools) for n, tools in (("a", ["x"]), ("b", ["x"]), ("c", ["x", "y"]))}
    resolver = FakeResolver("a", "b")
    backend = NetworkBackend(
        Settings(bearer_token="t" * 20, state_dir=tmp_path), {"ns": f"tls://{NAME}:1"}, None, INTERVAL, resolver
    )
    pool = backend.create(asyncio.run(backend.discover()).namespaces[0], SecretEnv())
    pool._connect = lambda address: members[address.removeprefix("tls://").split(":")[0]]

    async def main():
        await pool.start(5)
        turns = [await _call(pool, "x") for _ in range(4)]
        members["a"].inflight = 2
        fewest = {await _call(pool, "x") for _ in range(3)}
        resolver.answer = ["a", "b", "c"]
        await _until(lambda: "tls://c:1" in _by_address(pool), "c joined")
        having = {await _call(pool, "y") for _ in range(3)}
        lead_before = sorted(t["name"] for t in pool.tools)
        members["a"].state = "restarting"
        lead_after = pool._source().address
        await pool.stop(1)
        return turns, fewest, having, lead_before, lead_after

    turns, fewest, having, lead_before, lead_after = asyncio.run(main())
    assert sorted(turns) == ["tls://a:1", "tls://a:1", "tls://b:1", "tls://b:1"]  # ties taken in turn
    assert fewest == {"tls://b:1"}  # a has two calls in flight
    assert having == {"tls://c:1"}  # only c has tool y
    assert lead_before == ["x"] and lead_after == "tls://b:1"  # a listed first; b when a is not ready


def test_a_new_lead_listing_other_tools_is_announced(tmp_path):
    """A rolling update's end: the workers of the old image leave, the new image's list other tools; the pool
    calls on_change (the registry then sends tools/list_changed to the sessions) once, not each round."""
    members = {n: FakeMember(f"tls://{n}:1", tools) for n, tools in (("old", ["x"]), ("new", ["x", "y"]))}
    resolver = FakeResolver("old")
    backend = NetworkBackend(
        Settings(bearer_token="t" * 20, state_dir=tmp_path), {"ns": f"tls://{NAME}:1"}, None, INTERVAL, resolver
    )
    pool = backend.create(asyncio.run(backend.discover()).namespaces[0], SecretEnv())
    pool._connect = lambda address: members[address.removeprefix("tls://").split(":")[0]]
    announced: list[list[str]] = []
    pool.on_change = lambda: announced.append(sorted(t["name"] for t in pool.tools))

    async def main():
        await pool.start(5)
        await asyncio.sleep(INTERVAL * 3)  # rounds with the same lead: nothing to announce
        quiet = list(announced)
        resolver.answer = ["old", "new"]
        await _until(lambda: "tls://new:1" in _by_address(pool), "the new worker joined")
        await asyncio.sleep(INTERVAL * 2)
        still_old = list(announced)  # the lead is still the old worker: its list stands
        resolver.answer = ["new"]
        await _until(lambda: bool(announced), "the change announced")
        await asyncio.sleep(INTERVAL * 3)
        await pool.stop(1)
        return quiet, still_old

    quiet, still_old = asyncio.run(main())
    assert announced == [["x", "y"]]
    assert not quiet and not still_old
