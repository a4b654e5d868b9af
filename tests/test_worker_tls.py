"""The worker protocol over the network: a real worker on loopback TCP with mutual TLS, a gateway
(`--backend network`) calling its tools over MCP and REST, cancellation, events and asks over TLS; peers
without the right certificate refused and logged while the other calls go on; the cluster CA rotated (both
CAs trusted, then the old one retired and its certificates refused)."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import socket
import ssl
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from conftest import TOOLDOCK, Gateway
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from netkit import TESTING, NetWorker, cluster_ca
from netkit import free_port as _free_port

from tooldock import cluster
from tooldock.runtime.workerclient import ProtocolMismatch, WorkerConnection
from tooldock.worker.tls import TLSFiles

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> Path:
    return cluster_ca(tmp_path_factory.mktemp("cluster") / "ca")


@pytest.fixture(scope="module")
def worker(ca, tmp_path_factory):
    w = NetWorker(ca / "certs" / "worker", tmp_path_factory.mktemp("worker") / "worker.log")
    yield w
    w.stop()


@pytest.fixture(scope="module")
def gateway(ca, worker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gw")
    (tmp / "tools").mkdir()
    env = {"TOOLDOCK_WORKERS": f"testing={worker.address}", "TOOLDOCK_TLS_DIR": str(ca / "certs" / "gateway")}
    gw = Gateway(tmp / "tools", tmp / "gateway.log", env, ("--backend", "network")).start()
    gw.wait_for(lambda: gw.namespace("testing")["state"] == "ready", 30, "the network worker")
    yield gw
    gw.stop()


def _session(gateway, **callbacks):
    async def open_session(body):
        async with httpx2.AsyncClient(headers=gateway.headers("testing"), timeout=60) as http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write, **callbacks) as session:
                    await session.initialize()
                    return await body(session)

    return open_session


def _context(tls_dir: Path | None, trust: Path) -> ssl.SSLContext:
    """A client context as a peer would make it by hand: trusts `trust`, presents `tls_dir`'s certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(cafile=trust)
    if tls_dir is not None:
        context.load_cert_chain(tls_dir / "cert.pem", tls_dir / "key.pem")
    return context


def _first_line(worker: NetWorker, context: ssl.SSLContext | None) -> bytes:
    """What the worker sends a peer that connects (with TLS when `context`, else plain TCP) and writes a
    request: its handshake line when served, b"" (or a TLS error) when refused."""
    with socket.create_connection((worker.host, int(worker.port)), timeout=10) as raw:
        try:
            sock = context.wrap_socket(raw) if context is not None else raw
            sock.sendall(b'{"id": "1", "op": "ping"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data
        except (ssl.SSLError, ConnectionError) as exc:
            return f"error: {type(exc).__name__}".encode()


# -- calls through the gateway, over TLS ---------------------------------------------------------------------


def test_rest_calls_reach_the_worker_over_tls(gateway, worker):
    reply = gateway.call("testing", "echo", value={"k": [1, 2]})
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"] == {"k": [1, 2]}
    failed = gateway.call("testing", "boom", message="kaput")
    assert failed.status_code == 500 and "kaput" in failed.text
    assert "gateway 'gateway' connected from 127.0.0.1:" in worker.logs
    listed = gateway.namespace("testing")
    assert listed["state"] == "ready" and listed["address"] == worker.address


def test_requests_are_multiplexed_on_the_one_connection(gateway, worker):
    async def main():
        async with httpx2.AsyncClient(headers=gateway.headers("testing"), timeout=60) as http:
            calls = [http.post(f"{gateway.url}/tools/aslow", json={"seconds": 1}) for _ in range(8)]
            return await asyncio.gather(*calls)

    started = time.monotonic()
    replies = asyncio.run(main())
    assert [r.status_code for r in replies] == [200] * 8
    assert time.monotonic() - started < 4  # eight 1-second calls at once, not one after the other
    assert worker.logs.count("gateway 'gateway' connected") == 1  # one connection carried them all


def test_mcp_calls_events_and_asks_over_tls(gateway):
    heard: list[str] = []
    asked: list[str] = []

    async def on_log(params):
        heard.append(params.data["msg"] if isinstance(params.data, dict) else params.data)

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"value": "Ada"})

    async def body(session):
        await session.set_logging_level("debug")
        listed = await session.list_tools()
        chatty = await session.call_tool("chatty", {})
        greeted = await session.call_tool("ask_name", {})
        return listed, chatty, greeted

    listed, chatty, greeted = asyncio.run(
        _session(gateway, logging_callback=on_log, elicitation_callback=on_elicit)(body)
    )
    assert {"echo", "chatty", "ask_name", "watch_cancel"} <= {t.name for t in listed.tools}
    assert chatty.content[0].text == "done"
    assert heard == ["a debug line", "an info line", "a warning line"]  # events, in order
    assert asked == ["What is your name?"] and greeted.content[0].text == "hello Ada"  # an ask and its answer


def test_cancellation_reaches_the_worker_over_tls(gateway, tmp_path):
    marker = tmp_path / "cancelled.txt"
    progressed: asyncio.Event | None = None

    async def body(session):
        nonlocal progressed
        progressed = asyncio.Event()

        async def on_progress(value, total, message):
            progressed.set()

        async with anyio.create_task_group() as tg:
            async def call():
                await session.call_tool("watch_cancel", {"marker": str(marker)}, progress_callback=on_progress)

            tg.start_soon(call)
            await asyncio.wait_for(progressed.wait(), 30)  # a progress event came over TLS: the tool runs
            tg.cancel_scope.cancel()
        await session.send_ping()
        return True

    started = time.monotonic()
    assert asyncio.run(_session(gateway)(body))
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text() == "cancelled"
    assert time.monotonic() - started < 25


# -- peers without the right credentials ---------------------------------------------------------------------


def test_a_peer_with_the_cluster_certificate_is_served(ca, worker):
    """The control for the refusals below: the same raw client, with a good certificate, gets the handshake."""
    line = _first_line(worker, _context(ca / "certs" / "gateway", ca / "trust.pem"))
    assert json.loads(line)["op"] == "ready"


def test_peers_without_the_right_credentials_are_refused_and_logged(ca, worker, gateway, tmp_path):
    other = tmp_path / "other-ca"
    cluster.init(other)
    stranger, _ = cluster.issue(other, "stranger")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=10)
    expired, _ = cluster.issue(ca, "expired", days=1, out=tmp_path / "expired", not_before=past)
    before = len(worker.refusals())

    slow: list[int] = []  # a call in flight on the gateway's connection while the refusals happen
    thread = threading.Thread(target=lambda: slow.append(gateway.call("testing", "aslow", seconds=2).status_code))
    thread.start()
    time.sleep(0.3)
    cases = {
        "plain TCP": None,
        "no client certificate": _context(None, ca / "trust.pem"),
        "a certificate of another CA": _context(stranger, ca / "trust.pem"),
        "an expired certificate": _context(expired, ca / "trust.pem"),
    }
    for what, context in cases.items():
        got = _first_line(worker, context)
        assert b'"op":"ready"' not in got and b"pong" not in got, f"{what}: served {got[:200]!r}"
    thread.join(30)
    assert slow == [200]

    lines = worker.wait_for_refusal(before + len(cases))[before:]
    assert len(lines) == len(cases), lines
    assert all(re.search(r"refused a connection from 127\.0\.0\.1:\d+: \S", line) for line in lines), lines
    text = "\n".join(lines).lower()
    assert "not tls" in text and "no client certificate" in text and "local issuer" in text and "expired" in text
    assert "PRIVATE KEY" not in worker.logs and "BEGIN" not in worker.logs
    assert worker.proc.poll() is None
    assert gateway.call("testing", "echo", value={"still": True}).json()["result"] == {"still": True}


def test_the_gateway_refuses_a_worker_of_another_ca(ca, worker, tmp_path):
    other = tmp_path / "other-ca"
    cluster.init(other)
    stranger, _ = cluster.issue(other, "stranger")

    async def main():
        await WorkerConnection.open("testing", worker.address, None, TLSFiles(stranger))

    with pytest.raises((ssl.SSLError, ProtocolMismatch, ConnectionError)):
        asyncio.run(main())


def test_a_worker_that_is_not_listed_as_tls_refuses_to_start(ca, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tooldock.worker", "--namespace", "testing", "--dir", str(TESTING),
         "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60, env={**os.environ,
                                                                                        "TOOLDOCK_TLS_DIR": ""})
    assert result.returncode == 2 and "--listen needs --tls-dir" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "tooldock.worker", "--dir", str(TESTING), "--listen", "127.0.0.1:0",
         "--tls-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "TLS directory" in result.stderr and "cert.pem" in result.stderr


def test_the_network_backend_says_what_is_missing(tmp_path):
    (tmp_path / "tools").mkdir()
    result = subprocess.run(
        [TOOLDOCK, "serve", str(tmp_path / "tools"), "--port", "0", "--backend", "network"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "TOOLDOCK_BEARER_TOKEN": "x" * 20, "TOOLDOCK_STATE_DIR": str(tmp_path / "state"),
             "TOOLDOCK_WORKERS": "testing=127.0.0.1:1"},
    )
    assert result.returncode != 0 and "tls://HOST:PORT" in result.stderr


# -- the gateway reconnects ----------------------------------------------------------------------------------


def test_the_gateway_reconnects_when_the_worker_comes_back(ca, tmp_path):
    port = _free_port()
    first = NetWorker(ca / "certs" / "worker", tmp_path / "w1.log", port)
    (tmp_path / "tools").mkdir()
    env = {"TOOLDOCK_WORKERS": f"testing=tls://127.0.0.1:{port}", "TOOLDOCK_TLS_DIR": str(ca / "certs" / "gateway")}
    gw = Gateway(tmp_path / "tools", tmp_path / "gw.log", env, ("--backend", "network")).start()
    second = None
    try:
        gw.wait_for(lambda: gw.namespace("testing")["state"] == "ready", 30, "the worker")
        pid = gw.call("testing", "pid").json()["result"]
        first.stop()
        gw.wait_for(lambda: gw.namespace("testing")["state"] != "ready", 15, "the lost connection")
        second = NetWorker(ca / "certs" / "worker", tmp_path / "w2.log", port)
        gw.wait_for(lambda: gw.call("testing", "pid").status_code == 200, 30, "the reconnection")
        assert gw.call("testing", "pid").json()["result"] != pid
    finally:
        gw.stop()
        first.stop()
        if second is not None:
            second.stop()


# -- the cluster CA: the CLI, files, rotation ----------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([TOOLDOCK, "cluster", *args], capture_output=True, text=True, timeout=60)
    assert "PRIVATE KEY" not in result.stdout + result.stderr  # a key is never printed
    return result


def test_cluster_cli_makes_the_files_with_private_keys_kept_private(tmp_path):
    folder = tmp_path / "ca"
    assert _cli("ca", "init", str(folder)).returncode == 0
    again = _cli("ca", "init", str(folder))
    assert again.returncode != 0 and "already holds a cluster CA" in again.stderr
    issued = _cli("cert", str(folder), "--name", "worker-1", "--days", "30")
    assert issued.returncode == 0 and issued.stdout.strip() == str(folder / "certs" / "worker-1")
    assert _cli("cert", str(folder), "--name", "../escape").returncode != 0
    for key in (folder / "ca.key", folder / "certs" / "worker-1" / "key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "certs" / "worker-1").stat().st_mode) == 0o700
    shown = json.loads(_cli("status", str(folder), "--json").stdout)
    assert [p["name"] for p in shown["peers"]] == ["worker-1"] and len(shown["trusted"]) == 1
    until = datetime.datetime.fromisoformat(shown["peers"][0]["not_after"])
    assert 29 <= (until - datetime.datetime.now(datetime.UTC)).days <= 30


def test_rotation_trusts_both_cas_then_the_retired_ones_certificates_are_refused(tmp_path):
    folder = tmp_path / "ca"
    assert _cli("ca", "init", str(folder)).returncode == 0
    for name in ("worker", "old-gateway"):
        assert _cli("cert", str(folder), "--name", name).returncode == 0
    old_gateway = tmp_path / "old-gateway"  # a gateway elsewhere keeps its copy: retire does not touch it
    assert _cli("cert", str(folder), "--name", "old-gw", "--out", str(old_gateway)).returncode == 0
    w = NetWorker(folder / "certs" / "worker", tmp_path / "worker.log")

    async def handshake(tls_dir: Path) -> str:
        conn = await WorkerConnection.open("testing", w.address, None, TLSFiles(tls_dir))
        try:
            return await conn.request("tools.call", tool="echo", arguments={"value": {"ok": 1}}) and "served"
        finally:
            await conn.close()

    def served(tls_dir: Path) -> bool:
        try:
            return asyncio.run(handshake(tls_dir)) == "served"
        except (OSError, ProtocolMismatch):
            return False

    try:
        assert served(old_gateway)
        assert _cli("ca", "rotate", str(folder)).returncode == 0
        assert len(cluster.status(folder)["trusted"]) == 2
        assert _cli("cert", str(folder), "--name", "new-gateway").returncode == 0
        assert served(folder / "certs" / "new-gateway")  # the worker took the new bundle without a restart
        assert served(old_gateway)  # and still trusts the old CA
        assert _cli("cert", str(folder), "--name", "worker").returncode == 0  # the worker moves to the new CA
        assert served(old_gateway) is False  # old-gateway's bundle lacks the new CA: it refuses the worker
        retire = _cli("ca", "retire", str(folder))
        assert retire.returncode != 0 and "old-gateway" in retire.stderr  # it would lock old-gateway out
        assert _cli("ca", "retire", str(folder), "--force").returncode == 0
        before = len(w.refusals())
        old_copy = folder / "certs" / "old-gateway"  # its certificate (old CA) with the new bundle
        assert served(old_copy) is False
        assert len(w.wait_for_refusal(before + 1)) == before + 1
        assert served(folder / "certs" / "new-gateway")
        assert len(cluster.status(folder)["trusted"]) == 1
    finally:
        w.stop()
