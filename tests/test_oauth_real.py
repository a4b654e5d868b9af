"""ToolDock as an OAuth resource server (issue 62), against a real authorization server on loopback: panva's
oidc-provider (OpenID Certified) with resource indicators, JWT access tokens, the client credentials grant,
dynamic registration and introspection (tests/oauthkit.py).

Discovery as the MCP authorization specification says (protected resource metadata, the 401's challenge);
client-credentials tokens calling tools over MCP and REST; the refusals, each with its status and header (no
token, another resource, another issuer, expired, a forged signature, `alg: none`, HMAC with the public key, a
read scope calling a tool that writes, a token after its key was rotated out); opaque tokens through
introspection; the API keys and the bearer token beside it; the subject and client in the audit log and the
request's log line, never the token; the token never sent on to a worker."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from conftest import STATE_DIR, TOKEN, Gateway
from oauthkit import Person as _Person
from oauthkit import Provider, SigningKey, provider_home
from oauthkit import TokenMemory as _Memory
from relaykit import RELAY_TOOLS, cleanup, relay_env

pytestmark = pytest.mark.slow

ECHO_HEADERS_TOOL = '''import os

from fastmcp import Context
from fastmcp.tools import tool


@tool(annotations={"readOnlyHint": True})
async def everything_seen(ctx: Context) -> str:
    """What this worker can see of the call: its request context, its environment."""
    return repr(ctx.request_context) + repr(dict(os.environ))
'''

# An upstream MCP server (stdio) that answers `seen` with every message the gateway sent it and its environment.
RECORDER = '''import json, os, sys
lines = []
for line in sys.stdin:
    lines.append(line)
    request = json.loads(line)
    rid, method = request.get("id"), request.get("method")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": request["params"].get("protocolVersion", "2025-11-25"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "recorder", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "seen", "description": "What this server was sent.",
                             "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps([lines, dict(os.environ)])}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\\n")
    sys.stdout.flush()
'''


class Setup:
    def __init__(self, provider: Provider, gateway: Gateway, keys: Any, logs: Path) -> None:
        self.provider, self.gateway, self.keys, self.logs = provider, gateway, keys, logs
        self.url = gateway.url
        self.resource = f"{gateway.url}/mcp"

    def request(self, method: str, path: str, token: str | None, namespace: str | None = "project",
                body: Any = None, **headers: str) -> httpx.Response:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if namespace:
            headers["X-Namespace"] = namespace
        return httpx.request(method, self.url + path, headers=headers, json=body, timeout=60)

    def claims(self, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.provider.issuer, "sub": "alice", "client_id": "forger", "aud": self.resource,
                "scope": "tooldock:admin", "iat": now, "exp": now + 300, **extra}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("oauth")
    provider = Provider(provider_home(STATE_DIR), tmp).start()
    shutil.copytree(RELAY_TOOLS, tmp / "tools")
    (tmp / "tools" / "project" / "seen.py").write_text(ECHO_HEADERS_TOOL)
    (tmp / "recorder.py").write_text(RECORDER)
    (tmp / "tools" / "up").mkdir()
    (tmp / "tools" / "up" / "tools.toml").write_text(
        f'active_toolsets = ["*"]\n[[servers]]\nnamespace = "rec"\ncommand = "{sys.executable} {tmp / "recorder.py"}"\n')
    env, sock, keys = relay_env(
        TOOLDOCK_OAUTH_ISSUER=provider.issuer, TOOLDOCK_OAUTH_CLIENT_ID="gateway",
        TOOLDOCK_OAUTH_CLIENT_SECRET="gateway-secret-0123456789", TOOLDOCK_LOG_DIR=str(tmp / "audit"),
    )
    gateway = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    yield Setup(provider, gateway, keys, tmp / "audit")
    gateway.stop()
    provider.stop()
    cleanup(sock)


def challenge(response: httpx.Response) -> dict[str, str]:
    header = response.headers.get("www-authenticate", "")
    assert header.startswith("Bearer "), header
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def run_mcp(url: str, token: str, body: Any, namespace: str = "project") -> Any:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> Any:
        headers = {"Authorization": f"Bearer {token}", "X-Namespace": namespace}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return asyncio.run(main())


# discovery ----------------------------------------------------------------------------------------------------


def test_no_token_is_401_pointing_at_the_protected_resource_metadata(setup: Setup):
    answer = setup.request("POST", "/mcp", None, body={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
    found = challenge(answer)
    assert found["resource_metadata"] == f"{setup.url}/.well-known/oauth-protected-resource/mcp"
    assert "error" not in found  # no credential at all: no error code (RFC 6750 section 3.1)
    document = httpx.get(found["resource_metadata"], timeout=10)
    assert document.status_code == 200 and document.headers["access-control-allow-origin"] == "*"
    assert document.json() == {
        "resource": setup.resource, "authorization_servers": [setup.provider.issuer],
        "bearer_methods_supported": ["header"], "resource_name": "ToolDock",
        "scopes_supported": ["tooldock:admin", "tooldock:write", "tooldock:read"]}
    assert httpx.get(f"{setup.url}/.well-known/oauth-protected-resource", timeout=10).json() == document.json()


def test_one_namespaces_endpoint_has_its_own_resource(setup: Setup):
    answer = setup.request("GET", "/ns/project/tools", None, namespace=None)
    url = challenge(answer)["resource_metadata"]
    assert url == f"{setup.url}/.well-known/oauth-protected-resource/ns/project/mcp"
    assert httpx.get(url, timeout=10).json()["resource"] == f"{setup.url}/ns/project/mcp"
    # a token for that endpoint serves that namespace, and no other
    token = setup.provider.token(f"{setup.url}/ns/project/mcp", "tooldock:write")
    assert setup.request("POST", "/tools/echo", token, "project", {"text": "hi"}).json() == {"result": "hi"}
    refused = setup.request("POST", "/tools/balance", token, "billing", {})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_in_scope"


# tokens that work ---------------------------------------------------------------------------------------------


def test_a_client_credentials_token_lists_and_calls_tools_over_mcp_and_rest(setup: Setup):
    token = setup.provider.token(setup.resource, "tooldock:write")
    assert setup.request("POST", "/tools/create", token, "project", {"name": "oauth-made"}).status_code == 200
    listed = setup.request("GET", "/tools", token, "project").json()["tools"]
    assert {t["name"] for t in listed} >= {"create", "echo", "fail"}

    async def body(session: Any) -> Any:
        tools = await session.list_tools()
        result = await session.call_tool("echo", {"text": "over mcp"})
        return [t.name for t in tools.tools], result

    names, result = run_mcp(setup.url, token, body)
    assert "create" in names and "echo" in names
    assert not result.is_error and result.structured_content == {"result": "over mcp"}


def test_a_read_token_sees_only_read_only_tools(setup: Setup):
    token = setup.provider.token(setup.resource, "tooldock:read")
    names = run_mcp(setup.url, token, lambda s: _names(s))
    assert "echo" in names and "create" not in names and "fail" not in names


async def _names(session: Any) -> list[str]:
    return [t.name for t in (await session.list_tools()).tools]


def test_an_opaque_token_is_checked_by_introspection(setup: Setup):
    token = setup.provider.token(setup.resource, "tooldock:read", client="opaque-machine")
    assert token.count(".") != 2  # not a JWT
    assert setup.request("POST", "/tools/echo", token, "project", {"text": "o"}).json() == {"result": "o"}
    # the provider revokes it: the gateway's cache of the answer lasts at most a minute, a new one is refused
    assert setup.request("POST", "/tools/echo", "not-a-token-at-all", "project", {"text": "o"}).status_code == 401


def test_api_keys_and_the_bearer_token_keep_working(setup: Setup):
    _, key = setup.keys.create("reader", "read", ("project",))
    assert setup.request("POST", "/tools/echo", key, "project", {"text": "k"}).json() == {"result": "k"}
    assert setup.request("POST", "/tools/charge", TOKEN, "billing", {"amount": 1}).json() == {"result": 1.0}


# refusals -----------------------------------------------------------------------------------------------------


def _none_token(claims: dict[str, Any]) -> str:
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{part({'alg': 'none', 'typ': 'at+jwt', 'kid': 'k1'})}.{part(claims)}."


def _hmac_with_public_key(setup: Setup) -> str:
    """The algorithm confusion attack: HS256 keyed with the issuer's public key, which anyone can read."""
    import hashlib
    import hmac

    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=")  # noqa: E731
    signing = part({"alg": "HS256", "typ": "at+jwt", "kid": "k1"}) + b"." + part(setup.claims())
    mac = hmac.new(setup.provider.key.public_pem(), signing, hashlib.sha256).digest()
    return (signing + b"." + base64.urlsafe_b64encode(mac).rstrip(b"=")).decode()


REFUSED = {
    "another resource": lambda s: s.provider.token("http://127.0.0.1:9/mcp", "tooldock:admin"),
    "another issuer": lambda s: s.provider.key.sign(s.claims(iss="http://127.0.0.1:9")),
    "expired": lambda s: s.provider.key.sign(s.claims(iat=int(time.time()) - 900, exp=int(time.time()) - 600)),
    "not yet valid": lambda s: s.provider.key.sign(s.claims(nbf=int(time.time()) + 600)),
    "forged signature": lambda s: SigningKey("k1").sign(s.claims()),
    "alg none": lambda s: _none_token(s.claims()),
    "hmac with the public key": _hmac_with_public_key,
    "no audience": lambda s: s.provider.key.sign({k: v for k, v in s.claims().items() if k != "aud"}),
    "garbage": lambda s: "a.b.c",
}


@pytest.mark.parametrize("case", list(REFUSED))
@pytest.mark.parametrize("route", ["mcp", "rest"])
def test_a_bad_token_is_401_invalid_token(setup: Setup, case: str, route: str):
    token = REFUSED[case](setup)
    if route == "mcp":
        answer = setup.request("POST", "/mcp", token, body={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                               Accept="application/json, text/event-stream")
    else:
        answer = setup.request("POST", "/tools/echo", token, "project", {"text": "x"})
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "invalid_token"
    found = challenge(answer)
    assert found["error"] == "invalid_token" and found["resource_metadata"].endswith("/oauth-protected-resource/mcp")
    assert token not in answer.text and token not in setup.gateway.logs


def test_a_forged_token_is_refused_even_when_its_claims_are_the_real_ones(setup: Setup):
    """The control for the cases above: the same claims signed with the provider's key do work."""
    assert setup.request("POST", "/tools/echo", setup.provider.key.sign(setup.claims()), "project",
                         {"text": "y"}).json() == {"result": "y"}


@pytest.mark.parametrize("route", ["mcp", "rest", "rest-call"])
def test_a_read_scope_calling_a_tool_that_writes_is_403_insufficient_scope(setup: Setup, route: str):
    token = setup.provider.token(setup.resource, "tooldock:read")
    if route == "mcp":
        init = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "create",
                                                                           "arguments": {"name": "z"}}}
        answer = setup.request("POST", "/mcp", token, body=init, Accept="application/json, text/event-stream",
                               **{"MCP-Protocol-Version": "2025-11-25"})
    elif route == "rest":
        answer = setup.request("POST", "/tools/create", token, "project", {"name": "z"})
    else:
        answer = setup.request("POST", "/tools/call", token, "project", {"name": "create", "arguments": {"name": "z"}})
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["code"] == "insufficient_scope"
    found = challenge(answer)
    assert found["error"] == "insufficient_scope" and found["scope"] == "tooldock:write"
    assert found["resource_metadata"] == f"{setup.url}/.well-known/oauth-protected-resource/mcp"


def test_a_token_without_any_tooldock_scope_is_403(setup: Setup):
    token = setup.provider.key.sign(setup.claims(scope="openid profile"))
    answer = setup.request("POST", "/tools/echo", token, "project", {"text": "x"})
    assert answer.status_code == 403 and challenge(answer)["error"] == "insufficient_scope"
    assert challenge(answer)["scope"] == "tooldock:read"


def test_a_session_opened_with_a_token_serves_only_its_subject(setup: Setup):
    accept = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    alice = setup.provider.key.sign(setup.claims(sub="alice", scope="tooldock:read"))
    opened = setup.request("POST", "/mcp", alice, body=init, **accept)
    assert opened.status_code == 200, opened.text
    session = {**accept, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    again = setup.provider.key.sign(setup.claims(sub="alice", scope="tooldock:read", jti="another token"))
    assert setup.request("POST", "/mcp", again, body=listing, **session).status_code == 200
    bob = setup.provider.key.sign(setup.claims(sub="bob", scope="tooldock:read"))
    assert setup.request("POST", "/mcp", bob, body=listing, **session).status_code == 404


# what is logged, and what is not sent on ----------------------------------------------------------------------


def test_subject_and_client_are_logged_never_the_token(setup: Setup):
    token = setup.provider.token(setup.resource, "tooldock:read")
    assert setup.request("POST", "/tools/echo", token, "project", {"text": "audited"}).status_code == 200
    deadline, lines = time.monotonic() + 10, []
    while time.monotonic() < deadline and not lines:
        time.sleep(0.2)
        lines = [json.loads(line) for f in setup.logs.glob("*.jsonl") for line in f.read_text().splitlines()
                 if '"machine"' in line and '"echo"' in line]
    assert lines and lines[-1]["subject"] == "machine" and lines[-1]["client_id"] == "machine"
    assert lines[-1]["key_id"].startswith("oauth-")
    assert "sub=machine client=machine" in setup.gateway.logs  # the request's log line
    everything = setup.gateway.logs + "".join(f.read_text() for f in setup.logs.glob("*.jsonl"))
    assert token not in everything and token.split(".")[2] not in everything


def test_the_token_is_not_sent_on_to_the_worker(setup: Setup):
    token = setup.provider.token(setup.resource, "tooldock:read")
    answer = setup.request("POST", "/tools/everything_seen", token, "project", {})
    assert answer.status_code == 200, answer.text
    seen = answer.json()["result"]
    assert "RequestContext" in seen and "PATH" in seen  # its request context and environment
    assert token not in seen and token.split(".")[2] not in seen and "Bearer" not in seen


def test_the_token_is_not_sent_on_to_an_upstream_mcp_server(setup: Setup):
    token = setup.provider.token(setup.resource, "tooldock:read")
    answer = setup.request("POST", "/tools/rec_seen", token, "up", {})
    assert answer.status_code == 200, answer.text
    seen = answer.json()["result"]
    assert "tools/call" in seen  # what it was sent, and its environment
    assert token not in seen and token.split(".")[2] not in seen and "Bearer" not in seen


# rotation (last: it restarts the provider with another key) ---------------------------------------------------


def test_after_a_key_rotation_new_tokens_work_and_the_old_key_is_refused(setup: Setup):
    old = setup.provider.token(setup.resource, "tooldock:read")
    assert setup.request("POST", "/tools/echo", old, "project", {"text": "1"}).status_code == 200
    setup.provider.rotate(SigningKey("k2"))
    time.sleep(5.1)  # the gateway fetches the keys again at most every 5 s
    new = setup.provider.token(setup.resource, "tooldock:read")
    assert jwt.get_unverified_header(new)["kid"] == "k2"
    assert setup.request("POST", "/tools/echo", new, "project", {"text": "2"}).json() == {"result": "2"}
    refused = setup.request("POST", "/tools/echo", old, "project", {"text": "3"})
    assert refused.status_code == 401 and challenge(refused)["error"] == "invalid_token"
    assert "k1" in refused.json()["error"]["message"]


# the official MCP SDK client's OAuth flow ------------------------------------------------------------------------


def test_the_official_sdk_client_signs_in_with_discovery_registration_and_pkce(setup: Setup):
    """Discovery from the 401, dynamic client registration, authorization code + PKCE with the provider's
    login and consent, the token for this resource, then tools/list and tools/call."""
    import httpx2
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import OAuthClientMetadata

    redirect_uri = "http://127.0.0.1:9/callback"  # never reached: the person stops at the redirect
    person, storage = _Person(redirect_uri), _Memory()
    auth = OAuthClientProvider(
        server_url=f"{setup.url}/mcp",
        client_metadata=OAuthClientMetadata(client_name="tooldock-test", redirect_uris=[redirect_uri],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none"),
        storage=storage, redirect_handler=person.visit, callback_handler=person.callback)

    async def main() -> Any:
        async with httpx2.AsyncClient(auth=auth, headers={"X-Namespace": "project"}, timeout=60) as http:
            async with streamable_http_client(f"{setup.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    called = await session.call_tool("create", {"name": "by-alice"})
                    return [t.name for t in tools.tools], called

    names, called = asyncio.run(main())
    assert person.prompts == ["login", "consent"]
    assert storage.client is not None and storage.client.client_id  # registered dynamically
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["aud"] == setup.resource and claims["sub"] == "alice"
    assert "create" in names and "echo" in names
    assert not called.is_error, called
    assert f"sub=alice client={storage.client.client_id}" in setup.gateway.logs
