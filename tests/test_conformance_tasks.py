"""The official conformance suite's tasks extension scenarios (`io.modelcontextprotocol/tasks`, SEP-2663) through
the gateway serving tests/fixtures/tasks/jobs, each run on its own (`--scenario tasks-...`, 2026-07-28 wire).

The suite is the one pinned in tests/conformance (package.json + lock, installed once per lock); the CLI
cannot send headers, so it talks to the loopback proxy that adds the bearer token (tests/conformance/proxy.py).
In `--requirements 2026-07-28` these scenarios run unscored (reason: extension); here every check counts.
FastMCP 4.1.2 serving the same files (tests/conformance/serve_fastmcp.py) is the peer, measured in the same test.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_conformance import token_proxy

SUITE = Path(__file__).parent / "conformance"
FIXTURE = Path(__file__).parent / "fixtures" / "tasks"
TASKS = "io.modelcontextprotocol/tasks"


@pytest.fixture
def proxied(make_gateway) -> Iterator[str]:
    """The gateway serving the `jobs` namespace behind the token-adding proxy: the namespace's MCP URL."""
    gw = make_gateway(FIXTURE)
    assert gw.namespace("jobs")["state"] == "ready", gw.logs
    with token_proxy(gw) as port:
        yield f"http://127.0.0.1:{port}/ns/jobs/mcp"


def _tasks_scenarios(suite: tuple[str, str]) -> list[str]:
    node, cli = suite
    listing = subprocess.run([node, cli, "list", "--server"], capture_output=True, text=True, timeout=60, check=True)
    return re.findall(r"^\s*- (tasks-\S+) \[extension\]", listing.stdout, re.MULTILINE)


def _checks(suite: tuple[str, str], url: str, scenario: str, out: Path) -> tuple[list[dict], str]:
    node, cli = suite
    proc = subprocess.run([node, cli, "server", "--url", url, "--scenario", scenario, "-o", str(out)],
                          capture_output=True, text=True, timeout=180)
    found = sorted(out.glob("*/checks.json"))
    assert found, f"{scenario}: no checks.json\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
    return json.loads(found[-1].read_text()), proc.stdout


def test_tasks_extension_scenarios_pass_through_the_gateway(suite, proxied, tmp_path):
    scenarios = _tasks_scenarios(suite)
    assert len(scenarios) >= 10 and "tasks-lifecycle" in scenarios, scenarios  # the suite really listed them
    failed: dict[str, list[str]] = {}
    skipped: list[str] = []  # scenarios the suite itself skips (tasks-status-notifications, pending upstream)
    counts = {"SUCCESS": 0, "FAILURE": 0, "SKIPPED": 0}
    outputs = {}
    for scenario in scenarios:
        checks, outputs[scenario] = _checks(suite, proxied, scenario, tmp_path / scenario)
        assert checks, scenario
        if all(check["status"] == "SKIPPED" for check in checks):
            skipped.append(scenario)
        for check in checks:
            counts[check["status"]] = counts.get(check["status"], 0) + 1
            if check["status"] == "FAILURE":
                failed.setdefault(scenario, []).append(f"{check['id']}: {check.get('errorMessage')}")
    passing = [s for s in scenarios if s not in failed and s not in skipped]
    assert not failed, "\n".join(f"{s}: {f}\n{outputs[s][-2500:]}" for s, f in failed.items())
    assert counts["SUCCESS"] >= 40, counts
    assert len(passing) >= 9 and skipped == ["tasks-status-notifications"], (passing, skipped)
    print(f"\ntasks scenarios through the gateway: {len(passing)}/{len(scenarios)} pass, skipped by the suite "
          f"{skipped}; checks {counts}")

    # The peer, in the same run: FastMCP 4.1.2 serving the same files cannot start at all, since a
    # `task=True` tool needs a tasks extension it does not have (the separate fastmcp-tasks package).
    peer = subprocess.run([sys.executable, str(SUITE / "serve_fastmcp.py"), "0", "--fixture", str(FIXTURE / "jobs")],
                          capture_output=True, text=True, timeout=120)
    assert peer.returncode != 0 and f"no extension with identifier '{TASKS}'" in peer.stderr, peer.stderr[-2000:]
    print(f"tasks scenarios, FastMCP alone: 0/{len(scenarios)} (it stops at start-up: no tasks extension)")
