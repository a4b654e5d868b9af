"""HTTP upstreams: a ToolDock namespace served by one gateway becomes an upstream of another, over
streamable HTTP and over legacy SSE, with its bearer token taken from the secrets store (never written in
tools.toml, never shown by the gateway that uses it)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, FIXTURES, TOOLDOCK, Gateway, tooldock_cli
from test_upstream import DEMO, call_watching, catalog_of, run, session, text, write_upstream

pytestmark = pytest.mark.slow

UPSTREAM_TOKEN = "upstream-token-5c0ffee9d2"  # distinctive: a grep for it cannot match by chance
DEMO_SECRET = "demo-secret-a9e8d7c6b5"


def secrets_set(env: dict[str, str], key: str, value: str, namespace: str) -> None:
    proc = subprocess.run(
        [TOOLDOCK, "secrets", "set", key, "--namespace", namespace],
        input=value + "\n",
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Gateway:
    """The gateway whose multi-tool namespace is the upstream (its token is UPSTREAM_TOKEN)."""
    tmp = tmp_path_factory.mktemp("served")
    tools = tmp / "tools"
    tools.mkdir()
    os.symlink(EXAMPLES / "multi-tool", tools / "multi-tool")
    gw = Gateway(tools, tmp / "served.log", env={"TOOLDOCK_BEARER_TOKEN": UPSTREAM_TOKEN})
    gw.token = UPSTREAM_TOKEN
    gw.start()
    yield gw
    gw.stop()


@pytest.fixture
def fronting(served: Gateway, tmp_path: Path, make_gateway) -> Gateway:
    store = {"TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key")}
    tooldock_cli("secrets", "init", env=store)
    secrets_set(store, "UPSTREAM_TOKEN", UPSTREAM_TOKEN, "remote")
    secrets_set(store, "DEMO_SECRET", DEMO_SECRET, "remote")
    auth = 'headers = { Authorization = "Bearer ${secret:UPSTREAM_TOKEN}" }'
    write_upstream(
        tmp_path / "src",
        "remote",
        f"""active_toolsets = ["http_*", "sse_add", "demo_getenv"]

[[servers]]
namespace = "http"
url = "{served.url}/ns/multi-tool/mcp"
{auth}

[[servers]]
namespace = "sse"
url = "{served.url}/ns/multi-tool/sse"
{auth}

[[servers]]
namespace = "demo"
command = "{DEMO}"
env = {{ SECRET_VALUE = "${{secret:DEMO_SECRET}}" }}

[[servers]]
namespace = "refused"
url = "{served.url}/ns/multi-tool/mcp"
headers = {{ Authorization = "Bearer wrong-token-000000" }}
""",
    )
    return make_gateway(tmp_path / "src", env=store)


def test_a_tooldock_namespace_over_streamable_http_and_sse(fronting):
    status = fronting.namespace("remote")
    states = {s["namespace"]: (s["state"], s["transport"]) for s in status["servers"]}
    assert states["http"] == ("ready", "streamable-http") and states["sse"] == ("ready", "sse")
    assert {"http_add", "http_reverse_text", "sse_add"} <= set(status["tools"])
    assert fronting.call("remote", "http_add", a=20, b=22).json()["result"] == 42
    assert fronting.call("remote", "sse_add", a=1, b=2).json()["result"] == 3

    async def go() -> None:
        async with session(fronting, "remote") as client:
            result = await client.call_tool("http_reverse_text", {"text": "abc"})
            assert text(result) == "cba"
            assert "* sse_add" in catalog_of((await client.list_tools()).tools)

    run(go())


def test_secret_references_reach_the_upstream_and_nothing_else(fronting):
    # The server was given the value: what it sends back is exactly that value, which the gateway masks.
    assert fronting.call("remote", "demo_getenv", name="SECRET_VALUE").json()["result"] == {"result": "***"}
    # the gateway's own tokens never reach a stdio upstream
    assert fronting.call("remote", "demo_getenv", name="TOOLDOCK_BEARER_TOKEN").json()["result"] == {
        "result": "<unset>"
    }
    status = fronting.namespace("remote")
    assert status["secrets_status"] == "ok"
    fronting.conforms("/namespaces", "get", fronting.get("/namespaces").json())  # an upstream's fields too
    shown = fronting.get("/namespaces").text + fronting.get("/ns/remote/openapi.json").text + fronting.logs
    assert UPSTREAM_TOKEN not in shown and DEMO_SECRET not in shown


def test_an_upstream_that_refuses_the_token_fails_alone_with_the_reason(fronting):
    def refused() -> dict:
        return next(s for s in fronting.namespace("remote")["servers"] if s["namespace"] == "refused")

    fronting.wait_for(lambda: refused()["last_error"] is not None, what="the refused server's reason")
    assert "answered HTTP 401 Unauthorized" in refused()["last_error"]
    assert refused()["state"] in ("failed", "starting")  # retried with backoff (restart is on)
    assert fronting.namespace("remote")["state"] == "degraded"


LEAKY = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'upstreams' / 'leaky_server.py'))}"
LEAKY_VALUE = "leaky-value-3e4f5a6b7c"


def test_an_upstream_cannot_leak_its_secret_through_results_errors_logs_progress_or_stderr(tmp_path, make_gateway):
    store = {"TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key")}
    tooldock_cli("secrets", "init", env=store)
    secrets_set(store, "LEAKY", LEAKY_VALUE, "leaky")
    env = 'env = { LEAKY_VALUE = "${secret:LEAKY}" }'
    write_upstream(tmp_path / "src", "leaky", f"""active_toolsets = ["ok_*"]
restart = false

[[servers]]
namespace = "ok"
command = "{LEAKY}"
{env}

[[servers]]
namespace = "dead"
command = "{LEAKY} --die"
{env}
""")
    gw = make_gateway(tmp_path / "src", env=store)
    assert gw.call("leaky", "ok_leak").json()["result"] == {"result": "result says ***"}
    failed = gw.call("leaky", "ok_leak_error").json()
    assert "error says ***" in json.dumps(failed) and LEAKY_VALUE not in json.dumps(failed)

    result, progress, logs = run(call_watching(gw, "leaky", "ok_leak", {}))
    assert (result, progress, logs) == ("result says ***", [(1.0, 1.0, "progress says ***")], ["log says ***"])

    def dead() -> dict[str, Any]:
        return next(s for s in gw.namespace("leaky")["servers"] if s["namespace"] == "dead")

    gw.wait_for(lambda: "its last output" in (dead()["last_error"] or ""), what="the dead server's last words")
    assert "its last output: dying with ***" in dead()["last_error"], dead()
    gw.wait_for(lambda: "stderr says ***" in gw.logs, what="the server's stderr in the log, masked")
    assert "[leaky] ok: stderr says ***" in gw.logs and "[leaky] dead: dying with ***" in gw.logs
    shown = gw.logs + gw.get("/namespaces").text + gw.get("/ns/leaky/openapi.json").text
    assert LEAKY_VALUE not in shown


def test_a_refused_servers_reason_is_shown_whole_or_not_at_all(tmp_path: Path, monkeypatch) -> None:
    """Status reads meanwhile never see the SDK's bare "error response" without the HTTP status (a CI run
    once read GET /namespaces between the two)."""
    from tooldock.upstream import connection

    seen_while_asking: list[str] = []

    async def slow_status(spec, secrets, auth=None) -> str:
        seen_while_asking.append(conn.last_error)
        await asyncio.sleep(0.2)
        seen_while_asking.append(conn.last_error)
        return "HTTP 401 Unauthorized"

    async def nothing(*_: Any) -> None:
        return None

    monkeypatch.setattr(connection, "http_status", slow_status)
    spec = connection.UpstreamServer(namespace="refused", url="http://127.0.0.1:9/mcp", transport="streamable-http")
    conn = connection.Connection(
        spec, tmp_path, {}, startup_timeout=5, restart=False, on_up=print, on_down=print, on_notification=nothing
    )

    async def go() -> None:
        conn.start()
        await asyncio.wait_for(conn.first_attempt.wait(), 10)
        await conn.stop()

    asyncio.run(go())
    assert seen_while_asking == ["", ""]
    assert "(http://127.0.0.1:9/mcp answered HTTP 401 Unauthorized)" in conn.last_error
