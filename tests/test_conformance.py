"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, one run per requirement set:
`--requirements 2025-11-25` and `--requirements 2026-07-28`) against the gateway serving the fixture
namespace in tests/conformance/fixture, and against plain FastMCP serving the same files (the peer), in
the same test.

The suite's CLI cannot send headers, so it talks to a loopback proxy that adds the bearer token
(tests/conformance/proxy.py); the namespace is in the path (`/ns/fixture/mcp`). Node 22 and the suite
come from npm (tests/conformance/package-lock.json), installed once per lock into the test state dir.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "conformance"
SUMMARY = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)
# Scenarios a requirement set runs but does not score (its "Not scored for <revision>" list). Extensions (the
# tasks scenarios, which tests/test_conformance_tasks.py runs) are left out here; pending scenarios and ones
# added after the revision's release are held to the same bar as the scored ones.
UNSCORED = re.compile(r"^\s+[✓✗] (\S+) \(extension\)$", re.MULTILINE)
NOT_SCORED = re.compile(r"^\s+[✓✗] (\S+) \([a-z-]+\)$", re.MULTILINE)  # extensions, pending, added later
# The requirement sets the gateway must pass in full (the bar).
REQUIREMENTS = ("2025-11-25", "2026-07-28")
# What plain FastMCP 4.1.2 fails when it serves the same files, per set. 2025-11-25: no handlers for
# completion/complete (standalone decorators) or resources/subscribe. 2026-07-28: the same completion gap;
# it refuses a tool's imperative sampling and roots/list on a 2026-07-28 request (ToolDock's gateway answers
# input_required and runs the tool again with the answer); and it compares an `Mcp-Name` header with the
# whitespace around it (pending scenario http-header-validation; the gateway trims it, RFC 9110 5.5).
PEER_GAPS = {
    "2025-11-25": {"completion-complete", "resources-subscribe", "resources-unsubscribe"},
    "2026-07-28": {
        "completion-complete",
        "input-required-result-basic-sampling",
        "input-required-result-basic-list-roots",
        "http-header-validation",
    },
}


def _scenarios(suite: tuple[str, str], revision: str) -> set[str]:
    """The server scenarios the suite tags with a revision (extension and pending ones left to the run's
    own "not scored" list)."""
    node, cli = suite
    listing = subprocess.run([node, cli, "list", "--server"], capture_output=True, text=True, timeout=60, check=True)
    found = set()
    for line in listing.stdout.splitlines():
        match = re.match(r"\s*- (\S+) \[([^\]]*)\]", line)
        if match and revision in match.group(2).split(","):
            found.add(match.group(1))
    return found


def _run_suite(suite: tuple[str, str], url: str, revision: str, out: Path) -> tuple[dict[str, tuple[int, int]], str]:
    """{scenario: (checks passed, checks failed)} of one requirement set's scenarios, extensions left out."""
    node, cli = suite
    proc = subprocess.run([node, cli, "server", "--url", url, "--requirements", revision, "-o", str(out)],
                          capture_output=True, text=True, timeout=900)
    results = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in SUMMARY.finditer(proc.stdout)}
    for name in UNSCORED.findall(proc.stdout.split("=== SUMMARY ===")[-1]):
        results.pop(name, None)
    return results, proc.stdout + proc.stderr


@contextlib.contextmanager
def token_proxy(gw) -> Iterator[int]:
    """The token-adding proxy (tests/conformance/proxy.py) in front of a gateway, on a thread of its own:
    its port."""
    sys.path.insert(0, str(HERE))
    from proxy import TokenProxy

    loop = asyncio.new_event_loop()
    proxy = TokenProxy(int(gw.url.rsplit(":", 1)[1]), gw.token)
    port = loop.run_until_complete(proxy.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture
def proxied(make_gateway) -> Iterator[str]:
    """The gateway serving the fixture namespace, behind the token-adding proxy: the suite's base URL."""
    gw = make_gateway(HERE)
    assert gw.namespace("fixture")["state"] == "ready", gw.logs
    with token_proxy(gw) as port:
        yield f"http://127.0.0.1:{port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def peer() -> Iterator[str]:
    """Plain FastMCP serving the same fixture files directly (tests/conformance/serve_fastmcp.py)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "serve_fastmcp.py"), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "the FastMCP peer did not start"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_every_scenario_passes_through_the_gateway_and_the_peer_is_measured(suite, proxied, peer, tmp_path):
    """Each requirement set through the gateway (every scenario passes, pending ones too; extensions are
    tests/test_conformance_tasks.py's) and against plain FastMCP serving the same files (its failures are
    exactly PEER_GAPS), in the same run."""
    counts = []
    for revision in REQUIREMENTS:
        expected = _scenarios(suite, revision)
        results, output = _run_suite(suite, f"{proxied}/ns/fixture/mcp", revision, tmp_path / f"gateway-{revision}")
        assert len(results) >= 25, output[-4000:]  # the suite really ran the set
        missing = {name for name in expected - set(results) if f"{name} (" not in output}  # unscored: named so
        failed = {name: r for name, r in results.items() if r[1]}
        assert not missing and not failed, f"{revision}: missing {sorted(missing)}, failed {failed}\n{output[-4000:]}"

        peer_results, peer_output = _run_suite(suite, peer, revision, tmp_path / f"peer-{revision}")
        assert set(peer_results) == set(results), f"{revision}: the peer ran other scenarios\n{peer_output[-3000:]}"
        peer_failed = {name for name, (_, f) in peer_results.items() if f}
        assert peer_failed == PEER_GAPS[revision], f"{revision}: {sorted(peer_failed)}\n{peer_output[-3000:]}"
        checks = sum(p for p, _ in results.values()), sum(p for p, _ in peer_results.values())
        scored = set(results) - set(NOT_SCORED.findall(output.split("=== SUMMARY ===")[-1]))
        counts.append(
            f"{revision}: gateway {len(results)}/{len(results)} scenarios ({checks[0]} checks; "
            f"{len(scored)}/{len(scored)} scored), FastMCP {len(peer_results) - len(peer_failed)}/{len(peer_results)} "
            f"({checks[1]} checks; {len(scored - peer_failed)}/{len(scored)} scored)"
        )
    print("\nconformance " + "; ".join(counts))
