"""Real official MCP SDK clients of both major versions against a real gateway.

* SDK 2.x (the one ToolDock itself depends on, in this venv) speaks protocol 2026-07-28: no `initialize`,
  no session, a `server/discover` probe, and every request a self-contained POST whose
  `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers mirror the body. Also checked by hand with
  raw HTTP, including the rejections the SDK's server side owes a request whose headers disagree with it.
* SDK 1.x (latest `mcp<2` from PyPI) speaks 2025-11-25 with the initialize handshake and an
  `Mcp-Session-Id`, over streamable HTTP and over the legacy HTTP+SSE transport (2024-11-05). It runs in
  its own virtualenv (made with uv once per machine, cached under the test state dir) as a subprocess
  running tests/clients/mcp1_client.py.

Both routings are covered: `/mcp` with `X-Namespace`, and `/ns/{namespace}/mcp`.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from conftest import STATE_DIR
from test_manager import MANAGER_TOOLS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
NAMESPACE = "multi-tool"
TOOL_NAMES = ["add", "multiply", "reverse_text", "word_count"]
PV_KEY, INFO_KEY, CAPS_KEY = (
    types.PROTOCOL_VERSION_META_KEY,
    types.CLIENT_INFO_META_KEY,
    types.CLIENT_CAPABILITIES_META_KEY,
)

# (path, X-Namespace header): the two ways to name a namespace.
ROUTES = [
    pytest.param("/mcp", NAMESPACE, id="x-namespace"),
    pytest.param(f"/ns/{NAMESPACE}/mcp", None, id="ns-path"),
]


def test_this_sdk_is_2x_and_speaks_2026_07_28():
    """Guard the premise: if the SDK in .venv stops offering 2026-07-28, the tests below mean nothing."""
    from importlib.metadata import version

    assert version("mcp").startswith("2.")
    assert MODERN in MODERN_PROTOCOL_VERSIONS and HANDSHAKE in HANDSHAKE_PROTOCOL_VERSIONS


# ---------------------------------------------------------------------------------------------------
# SDK 2.x client, protocol 2026-07-28
# ---------------------------------------------------------------------------------------------------


def run_modern_client(
    gateway, path: str, namespace: str | None, body, mode: str = "auto"
) -> tuple[Any, list[dict]]:
    """Run `body(client)` in an SDK 2.x `Client` on streamable HTTP, recording every HTTP exchange."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    exchanges: list[dict[str, Any]] = []

    async def record(response) -> None:
        exchanges.append(
            {
                "method": response.request.method,
                "status": response.status_code,
                "request": dict(response.request.headers),
                "response": dict(response.headers),
            }
        )

    async def main() -> Any:
        async with httpx2.AsyncClient(
            headers=gateway.headers(namespace), timeout=60, event_hooks={"response": [record]}
        ) as http:
            transport = streamable_http_client(gateway.url + path, http_client=http)
            async with Client(transport, mode=mode) as client:
                return await body(client)

    return asyncio.run(main()), exchanges


@pytest.mark.parametrize("path, namespace", ROUTES)
def test_sdk2_client_discovers_lists_and_calls_statelessly(gateway, path, namespace):
    from mcp.shared.exceptions import MCPError

    async def body(client):
        seen = {
            "protocol_version": client.protocol_version,
            "discover": client.session.discover_result,
            "initialize": client.session.initialize_result,
            "server_info": client.server_info,
            "capabilities": client.server_capabilities,
        }
        seen["tools"] = await client.list_tools()
        seen["add"] = await client.call_tool("add", {"a": 2, "b": 3})
        seen["bad_args"] = await client.call_tool("add", {"a": "two", "b": 3})
        with pytest.raises(MCPError) as caught:
            await client.call_tool("no-such-tool", {})
        seen["unknown"] = caught.value
        return seen

    seen, exchanges = run_modern_client(gateway, path, namespace, body)

    # Negotiated by `server/discover`, never by `initialize`.
    assert seen["protocol_version"] == MODERN
    assert seen["initialize"] is None
    assert MODERN in seen["discover"].supported_versions
    assert seen["server_info"].name == f"tooldock/{NAMESPACE}"
    assert seen["capabilities"].tools is not None

    tools = {t.name: t for t in seen["tools"].tools}
    assert sorted(tools) == TOOL_NAMES
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert seen["add"].is_error is False
    assert seen["add"].structured_content == {"result": 5}
    assert seen["add"].content[0].text == "5.0"
    assert seen["bad_args"].is_error is True
    assert seen["bad_args"].structured_content["error"]["code"] == "invalid_arguments"
    assert seen["unknown"].code == types.INVALID_PARAMS and "no-such-tool" in seen["unknown"].message

    # On the wire: one self-contained POST per request, each carrying the routing headers, no session.
    assert [
        (e["method"], e["request"].get("mcp-method"), e["request"].get("mcp-name")) for e in exchanges
    ] == [
        ("POST", "server/discover", None),
        ("POST", "tools/list", None),
        ("POST", "tools/call", "add"),
        ("POST", "tools/call", "add"),
        ("POST", "tools/call", "no-such-tool"),
    ]
    for exchange in exchanges:
        assert exchange["request"]["mcp-protocol-version"] == MODERN
        assert "mcp-session-id" not in exchange["request"]
        assert "mcp-session-id" not in exchange["response"], exchange
        assert exchange["response"]["content-type"].startswith("application/json")
    # An unknown tool is INVALID_PARAMS, which the 2026-07-28 transport maps to HTTP 400.
    assert [e["status"] for e in exchanges] == [200, 200, 200, 200, 400]


def test_sdk2_client_pinned_to_2026_07_28_skips_discover(gateway):
    """`mode="2026-07-28"` adopts the version without a probe: the first request on the wire is the call
    (the SDK then lists tools once itself, to validate the result against the tool's output schema)."""

    async def body(client):
        return client.protocol_version, await client.call_tool("multiply", {"a": 6, "b": 7})

    (version, result), exchanges = run_modern_client(gateway, "/mcp", NAMESPACE, body, mode=MODERN)
    assert version == MODERN
    assert result.structured_content == {"result": 42}
    assert [e["request"]["mcp-method"] for e in exchanges] == ["tools/call", "tools/list"]
    assert all(e["status"] == 200 and "mcp-session-id" not in e["response"] for e in exchanges)


def test_sdk2_client_legacy_mode_still_gets_a_session(gateway):
    """The same 2.x client forced onto the handshake gets 2025-11-25 and a session: both eras side by side."""

    async def body(client):
        return client.protocol_version, await client.call_tool("add", {"a": 1, "b": 1})

    (version, result), exchanges = run_modern_client(gateway, "/mcp", NAMESPACE, body, mode="legacy")
    assert version == HANDSHAKE
    assert result.structured_content == {"result": 2}
    assert exchanges[0]["response"].get("mcp-session-id")


# --- the same exchanges by hand -------------------------------------------------------------------


def envelope(
    method: str,
    params: dict[str, Any] | None = None,
    version: Any = MODERN,
    request_id: int = 1,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A 2026-07-28 request: the per-request `_meta` envelope replaces the initialize handshake."""
    if meta is None:
        meta = {PV_KEY: version, CAPS_KEY: {}, INFO_KEY: {"name": "raw-httpx", "version": "0"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": meta}}


def modern_post(
    gateway,
    path: str,
    namespace: str | None,
    body: Any,
    *,
    method: str | None = None,
    name: str | None = None,
    version: str = MODERN,
    extra: list[tuple[str, str]] = (),
    auth: bool = True,
) -> httpx.Response:
    """POST with the routing headers the spec requires: `MCP-Protocol-Version`, `Mcp-Method` (the body's
    method unless given) and, for tools/call, prompts/get and resources/read, `Mcp-Name`."""
    headers = list((gateway.headers(namespace) if auth else {"X-Namespace": namespace or ""}).items())
    headers += [("Content-Type", "application/json"), ("Accept", ACCEPT), ("MCP-Protocol-Version", version)]
    if method is None and isinstance(body, dict):
        method = body.get("method")
    if method is not None:
        headers.append(("Mcp-Method", method))
    if name is not None:
        headers.append(("Mcp-Name", name))
    headers += list(extra)
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(gateway.url + path, content=content, headers=headers, timeout=60)


def assert_no_session(reply: httpx.Response) -> None:
    assert "mcp-session-id" not in reply.headers, dict(reply.headers)


@pytest.mark.parametrize("path, namespace", ROUTES)
def test_raw_2026_07_28_discover_list_and_call(gateway, path, namespace):
    discover = modern_post(gateway, path, namespace, envelope("server/discover"))
    assert discover.status_code == 200, discover.text
    assert_no_session(discover)
    result = discover.json()["result"]
    assert MODERN in result["supportedVersions"] and "tools" in result["capabilities"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == f"tooldock/{NAMESPACE}"

    listed = modern_post(gateway, path, namespace, envelope("tools/list", request_id=2))
    assert listed.status_code == 200, listed.text
    assert_no_session(listed)
    assert [t["name"] for t in listed.json()["result"]["tools"]] == TOOL_NAMES

    called = modern_post(
        gateway,
        path,
        namespace,
        envelope("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, request_id=3),
        name="add",
    )
    assert called.status_code == 200, called.text
    assert called.headers["content-type"].startswith("application/json")
    assert_no_session(called)
    reply = called.json()
    assert reply["id"] == 3 and reply["result"]["structuredContent"] == {"result": 5}
    assert reply["result"]["isError"] is False


def test_raw_2026_07_28_needs_no_handshake_and_holds_no_state(gateway):
    """A bare tools/call with no prior request works, and a made-up session id is not looked up (no sessions
    exist on this path to find or miss)."""
    reply = modern_post(
        gateway,
        "/mcp",
        NAMESPACE,
        envelope("tools/call", {"name": "reverse_text", "arguments": {"text": "abc"}}),
        name="reverse_text",
        extra=[("Mcp-Session-Id", "made-up")],
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["structuredContent"] == {"result": "cba"}
    assert_no_session(reply)


CALL_ADD = envelope("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})


@pytest.mark.parametrize(
    "body, kwargs, status, code, words",
    [
        pytest.param(
            CALL_ADD,
            {"method": "tools/list", "name": "add"},
            400,
            types.HEADER_MISMATCH,
            "mcp-method header",
            id="mcp-method-mismatch",
        ),
        pytest.param(
            CALL_ADD,
            {"name": "multiply"},
            400,
            types.HEADER_MISMATCH,
            "mcp-name header",
            id="mcp-name-mismatch",
        ),
        pytest.param(CALL_ADD, {}, 400, types.HEADER_MISMATCH, "mcp-name header", id="mcp-name-missing"),
        pytest.param(
            CALL_ADD,
            {"name": "add", "extra": [("Mcp-Method", "tools/call")]},
            400,
            types.HEADER_MISMATCH,
            "more than once",
            id="mcp-method-duplicated",
        ),
        pytest.param(
            envelope("tools/list", version="2025-11-25"),
            {},
            400,
            types.HEADER_MISMATCH,
            "protocol version",
            id="version-header-vs-envelope",
        ),
        pytest.param(
            envelope("tools/list", version="2099-01-01"),
            {"version": "2099-01-01"},
            400,
            types.UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported",
            id="unsupported-version",
        ),
        pytest.param(
            envelope("tools/list", meta={}), {}, 400, types.INVALID_PARAMS, "_meta", id="no-envelope"
        ),
        pytest.param(
            envelope("tooldock/no-such-method"), {}, 404, types.METHOD_NOT_FOUND, "", id="unknown-method"
        ),
    ],
)
def test_raw_2026_07_28_rejections(gateway, body, kwargs, status, code, words):
    """The SDK's validation ladder for a 2026-07-28 POST, through the gateway: every rejection is a JSON-RPC
    error with the request's id and the table-mapped HTTP status, and never opens a session."""
    reply = modern_post(gateway, "/mcp", NAMESPACE, body, **kwargs)
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    assert_no_session(reply)
    error = reply.json()
    assert error["id"] == body["id"] and error["error"]["code"] == code, error
    assert words in error["error"]["message"].lower()
    if code == types.UNSUPPORTED_PROTOCOL_VERSION:
        assert error["error"]["data"] == {
            "supported": list(MODERN_PROTOCOL_VERSIONS),
            "requested": "2099-01-01",
        }


def test_raw_2026_07_28_http_rules(gateway):
    notification = modern_post(
        gateway,
        "/mcp",
        NAMESPACE,
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    )
    assert notification.status_code == 202 and notification.content == b""
    assert_no_session(notification)

    batch = modern_post(gateway, "/mcp", NAMESPACE, [CALL_ADD], method="tools/call", name="add")
    assert batch.status_code == 400 and batch.json()["error"]["code"] == types.INVALID_REQUEST

    # No standalone GET stream and no DELETE at this version: nothing to listen on, no session to end.
    modern = {**gateway.headers(NAMESPACE), "MCP-Protocol-Version": MODERN, "Accept": "text/event-stream"}
    get = httpx.get(f"{gateway.url}/mcp", headers=modern, timeout=30)
    assert get.status_code == 405 and get.headers["allow"] == "POST"
    delete = httpx.delete(f"{gateway.url}/mcp", headers=modern, timeout=30)
    assert delete.status_code == 405

    # DNS-rebinding protection applies to this path too.
    foreign = modern_post(
        gateway, "/mcp", NAMESPACE, CALL_ADD, name="add", extra=[("Origin", "http://evil.example")]
    )
    assert foreign.status_code == 403

    # The gateway's own rules still come first: the bearer token, and a namespace that exists.
    unauthorized = modern_post(gateway, "/mcp", NAMESPACE, CALL_ADD, name="add", auth=False)
    assert unauthorized.status_code == 401
    unknown = modern_post(gateway, "/mcp", "nope", CALL_ADD, name="add")
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "namespace_not_found"
    unknown_path = modern_post(gateway, "/ns/nope/mcp", None, CALL_ADD, name="add")
    assert unknown_path.status_code == 404


# ---------------------------------------------------------------------------------------------------
# SDK 1.x client, protocol 2025-11-25, in its own virtualenv
# ---------------------------------------------------------------------------------------------------

MCP1_REQUIREMENT = "mcp>=1.23,<2"
MCP1_VENV = STATE_DIR / "venvs" / "mcp1"
MCP1_CLIENT = Path(__file__).resolve().parent / "clients" / "mcp1_client.py"
MCP1_CHECK = (
    "import importlib.metadata as m, mcp.client.sse, mcp.client.streamable_http; print(m.version('mcp'))"
)


def _mcp1_version(python: Path) -> str | None:
    """The 1.x SDK version importable by `python`, or None if that is not a working 1.x environment."""
    if not python.is_file():
        return None
    try:
        proc = subprocess.run(
            [str(python), "-c", MCP1_CHECK], check=False, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = proc.stdout.strip()
    return found if proc.returncode == 0 and found.startswith("1.") else None


def _uv(*args: str) -> subprocess.CompletedProcess[str]:
    from uv import find_uv_bin  # as tooldock/runtime/environments.py finds it

    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    return subprocess.run(
        [find_uv_bin(), *args], check=False, capture_output=True, text=True, env=env, timeout=600
    )


def _build_mcp1_venv(final: Path) -> str:
    """Build the venv in a temp dir and rename it into place: a half-built one is never reused. Returns
    uv's complaint if it could not be built, else ''."""
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-mcp1-", dir=final.parent))
    try:
        made = _uv("venv", "--quiet", "--python", sys.executable, str(tmp))
        if made.returncode != 0:
            return made.stdout + made.stderr
        install = ["pip", "install", "--quiet", "--python", str(tmp / "bin" / "python"), MCP1_REQUIREMENT]
        # From uv's cache when it has everything (no network), else from the index.
        if _uv(*install, "--offline").returncode != 0:
            online = _uv(*install)
            if online.returncode != 0:
                return online.stdout + online.stderr
        if _mcp1_version(tmp / "bin" / "python") is None:
            return f"the installed {MCP1_REQUIREMENT} does not import"
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        return ""
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def mcp1_python() -> Path:
    """The interpreter of a virtualenv with the latest 1.x `mcp`: made once per machine, reused while it
    still imports (a lock file keeps parallel test runs from building it twice)."""
    python = MCP1_VENV / "bin" / "python"
    if _mcp1_version(python) is not None:
        return python
    MCP1_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(MCP1_VENV.parent / "mcp1.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _mcp1_version(python) is None:
            problem = _build_mcp1_venv(MCP1_VENV)
            if problem:
                tail = "\n".join(problem.strip().splitlines()[-10:])
                reason = f"cannot install {MCP1_REQUIREMENT} with uv (no network to PyPI?):\n{tail}"
                if os.environ.get("CI") == "true":
                    pytest.fail(f"CI must provide this: {reason}")
                pytest.skip(reason)
    return python


def run_mcp1(
    python: Path, transport: str, url: str, headers: dict[str, str], tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    args = [str(python), str(MCP1_CLIENT), transport, url, tool, json.dumps(arguments)]
    args += [f"{k}={v}" for k, v in headers.items()]
    proc = subprocess.run(
        args,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, f"mcp 1.x client failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_mcp1_exercise(out: dict[str, Any]) -> None:
    assert out["sdk_version"].startswith("1.")
    assert out["protocol_version"] == HANDSHAKE
    assert out["server_info"]["name"] == f"tooldock/{NAMESPACE}"
    assert out["capabilities"]["tools"] == {"listChanged": True}
    tools = {t["name"]: t for t in out["tools"]}
    assert sorted(tools) == TOOL_NAMES
    assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
    assert out["call"]["isError"] is False
    assert out["call"]["structuredContent"] == {"result": 5}
    assert out["call"]["content"] == [{"type": "text", "text": "5.0"}]
    assert out["unknown_tool_error"]["code"] == types.INVALID_PARAMS
    assert "no-such-tool" in out["unknown_tool_error"]["message"]
    assert out["ping"] is True


@pytest.mark.parametrize("path, namespace", ROUTES)
def test_sdk1_client_over_streamable_http(gateway, mcp1_python, path, namespace):
    out = run_mcp1(
        mcp1_python, "streamable", gateway.url + path, gateway.headers(namespace), "add", {"a": 2, "b": 3}
    )
    assert out["transport"] == "streamable"
    assert_mcp1_exercise(out)

    # A stateful 2025-11-25 session: the initialize response issues the id, every later request carries it
    # with the negotiated version, and closing the client ends the session with a DELETE.
    session_id = out["session_id"]
    assert session_id
    exchanges = out["exchanges"]
    assert exchanges[0]["method"] == "POST" and exchanges[0]["status"] == 200
    assert exchanges[0]["response_session_id"] == session_id
    assert exchanges[0]["request_session_id"] is None
    for exchange in exchanges[1:]:
        assert exchange["request_session_id"] == session_id, exchange
        assert exchange["request_protocol_version"] == HANDSHAKE, exchange
        assert exchange["status"] in (200, 202, 204), exchange
    assert exchanges[-1]["method"] == "DELETE" and exchanges[-1]["status"] in (200, 204)
    assert {e["path"] for e in exchanges} == {path}


@pytest.mark.parametrize(
    "path, namespace",
    [
        pytest.param("/sse", NAMESPACE, id="x-namespace"),
        pytest.param(f"/ns/{NAMESPACE}/sse", None, id="ns-path"),
    ],
)
def test_sdk1_client_over_legacy_sse(gateway, mcp1_python, path, namespace):
    """The 2024-11-05 HTTP+SSE transport (`GET /sse` + `POST /messages`); the protocol version negotiated
    over it is still the newest both ends know."""
    out = run_mcp1(
        mcp1_python, "sse", gateway.url + path, gateway.headers(namespace), "add", {"a": 2, "b": 3}
    )
    assert out["transport"] == "sse"
    assert_mcp1_exercise(out)
    exchanges = out["exchanges"]
    assert exchanges[0]["method"] == "GET" and exchanges[0]["path"] == path
    assert exchanges[0]["content_type"].startswith("text/event-stream")
    posts = [e for e in exchanges if e["method"] == "POST"]
    assert posts and all(e["status"] == 202 for e in posts), posts
    assert all(e["path"].endswith("/messages") or e["path"].endswith("/messages/") for e in posts), posts


@pytest.mark.parametrize("transport, path", [("streamable", "/mcp"), ("sse", "/sse")])
def test_sdk1_client_drives_the_manager(make_gateway, mcp1_python, transport, path):
    """The manager (`tooldock serve --manager`) is served by the same stack: an SDK 1.x client lists its
    tools and calls one over streamable HTTP and legacy SSE."""
    from conftest import EXAMPLES, MANAGER_ARGS, TOKEN, manager_url

    gateway = make_gateway(EXAMPLES, args=MANAGER_ARGS)
    url = manager_url(gateway)
    out = run_mcp1(mcp1_python, transport, url + path, {"Authorization": f"Bearer {TOKEN}"},
                   "list_requirements", {"namespace": "async-tool"})
    assert out["sdk_version"].startswith("1.") and out["server_info"]["name"] == "tooldock-manager"
    assert len(out["tools"]) == MANAGER_TOOLS and {"write_tool", "reload_core"} <= {t["name"] for t in out["tools"]}
    assert out["call"]["isError"] is False
    assert out["call"]["structuredContent"] == {"namespace": "async-tool", "packages": ["httpx>=0.28.0"]}
