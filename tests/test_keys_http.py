"""API keys as bearer tokens on HTTP (issue 14): a scoped key sees only its namespaces and tools on
/namespaces, /tools, tools/list and OpenAPI, and is refused the rest by every route (X-Namespace,
/ns/{namespace}/..., the Tool Vault aliases, streamable HTTP MCP, legacy SSE); TOOLDOCK_BEARER_TOKEN stays
the admin token."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import TOKEN, Gateway
from relaykit import RELAY_TOOLS, cleanup, relay_env

from tooldock.keys import KeyStore


class Keyed:
    def __init__(self, gateway: Gateway, keys: KeyStore) -> None:
        self.gateway, self.keys = gateway, keys
        self.project_reader = keys.create("project-reader", "read", ("project",))[1]
        self.project_writer = keys.create("project-writer", "write", ("project",))[1]

    def request(self, method: str, path: str, key: str, namespace: str | None = None, body: Any = None,
                **headers: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}", **headers}
        if namespace:
            headers["X-Namespace"] = namespace
        return httpx.request(method, self.gateway.url + path, headers=headers, json=body, timeout=60)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keyed]:
    tmp = tmp_path_factory.mktemp("keyed")
    shutil.copytree(RELAY_TOOLS, tmp / "tools")
    env, sock, keys = relay_env(MANAGER_INTERNAL_TOKEN="manager-token-0123456789")
    gateway = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    yield Keyed(gateway, keys)
    gateway.stop()
    cleanup(sock)


def refused(response: httpx.Response, status: int = 403) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_the_bearer_token_still_sees_everything(keyed: Keyed):
    listing = keyed.request("GET", "/namespaces", TOKEN).json()
    assert [n["name"] for n in listing["namespaces"]] == ["billing", "project"]
    assert keyed.request("POST", "/tools/charge", TOKEN, "billing", {"amount": 2}).json() == {"result": 2.0}


def test_namespaces_lists_only_the_keys_namespaces_and_tools(keyed: Keyed):
    listing = keyed.request("GET", "/namespaces", keyed.project_reader).json()
    assert [n["name"] for n in listing["namespaces"]] == ["project"]
    project = listing["namespaces"][0]
    assert project["tools"] == ["list_projects", "echo", "slow"] and project["tool_count"] == 3  # as defined
    keyed.gateway.conforms("/namespaces", "get", listing)  # as the OpenAPI document says
    _, everything = keyed.keys.create("reader-all", "read")
    listing = keyed.request("GET", "/namespaces", everything).json()
    assert {n["name"]: n["tools"] for n in listing["namespaces"]} == {
        "billing": ["balance"], "project": ["list_projects", "echo", "slow"]}


@pytest.mark.parametrize("path, namespace", [("/tools", "project"), ("/tools/list", "project"),
                                             ("/ns/project/tools", None), ("/ns/project/tools/list", None)])
def test_tool_listings_are_narrowed_to_the_scope(keyed: Keyed, path: str, namespace: str | None):
    tools = keyed.request("GET", path, keyed.project_reader, namespace).json()["tools"]
    assert [t["name"] for t in tools] == ["list_projects", "echo", "slow"]  # in the order the file defines them
    tools = keyed.request("GET", path, keyed.project_writer, namespace).json()["tools"]
    assert [t["name"] for t in tools] == ["create", "list_projects", "echo", "fail", "slow"]


@pytest.mark.parametrize("method, path, namespace, body", [
    ("GET", "/tools", "billing", None),
    ("GET", "/tools/list", "billing", None),
    ("GET", "/ns/billing/tools", None, None),
    ("GET", "/ns/billing/tools/list", None, None),
    ("POST", "/tools/balance", "billing", {}),
    ("POST", "/ns/billing/tools/balance", None, {}),
    ("POST", "/tools/call", "billing", {"name": "balance", "arguments": {}}),
    ("POST", "/ns/billing/tools/call", None, {"name": "balance", "arguments": {}}),
    ("GET", "/tools/balance/schema", "billing", None),
    ("GET", "/ns/billing/tools/balance/schema", None, None),
    ("GET", "/openapi.json", "billing", None),
    ("GET", "/ns/billing/openapi.json", None, None),
    ("POST", "/mcp", "billing", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
    ("POST", "/ns/billing/mcp", None, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
    ("GET", "/sse", "billing", None),
    ("GET", "/ns/billing/sse", None, None),
    ("POST", "/messages?session_id=0123", "billing", {}),
    ("POST", "/ns/billing/messages?session_id=0123", None, {}),
])
def test_another_namespace_is_refused_by_every_route(keyed: Keyed, method: str, path: str, namespace: str | None,
                                                     body: Any):
    error = refused(keyed.request(method, path, keyed.project_writer, namespace, body,
                                  Accept="application/json, text/event-stream"))
    assert error["code"] == "not_in_scope" and "does not cover namespace 'billing'" in error["message"]


@pytest.mark.parametrize("method, path, namespace, body", [
    ("POST", "/tools/create", "project", {"name": "x"}),
    ("POST", "/ns/project/tools/create", None, {"name": "x"}),
    ("POST", "/tools/call", "project", {"name": "create", "arguments": {"name": "x"}}),
    ("POST", "/ns/project/tools/call", None, {"name": "create", "arguments": {"name": "x"}}),
    ("GET", "/tools/create/schema", "project", None),
    ("GET", "/ns/project/tools/create/schema", None, None),
])
def test_a_read_key_is_refused_tools_that_write(keyed: Keyed, method: str, path: str, namespace: str | None,
                                                body: Any):
    error = refused(keyed.request(method, path, keyed.project_reader, namespace, body))
    assert error["code"] == "not_in_scope" and "read-only tools" in error["message"]


def test_allowed_calls_work_and_unknown_tools_list_only_visible_ones(keyed: Keyed):
    assert keyed.request("POST", "/tools/echo", keyed.project_reader, "project", {"text": "a"}).json() == {"result": "a"}
    assert keyed.request("POST", "/ns/project/tools/call", keyed.project_reader, None,
                         {"name": "echo", "arguments": {"text": "b"}}).json() == {"result": "b"}
    error = refused(keyed.request("POST", "/tools/nosuch", keyed.project_reader, "project", {}), 404)
    assert "available: echo, list_projects, slow" in error["message"]
    error = refused(keyed.request("GET", "/tools", keyed.project_reader, "nosuch"))
    assert error["code"] == "not_in_scope"  # a namespace outside the scope is refused whether it exists or not


@pytest.mark.parametrize("path, namespace", [("/openapi.json", "project"), ("/ns/project/openapi.json", None)])
def test_openapi_documents_only_the_keys_tools(keyed: Keyed, path: str, namespace: str | None):
    doc = keyed.request("GET", path, keyed.project_reader, namespace).json()
    assert sorted(doc["paths"]) == ["/tools/echo", "/tools/list_projects", "/tools/slow"]
    doc = keyed.request("GET", path, TOKEN, namespace).json()
    assert "/tools/create" in doc["paths"]


def test_invalid_and_revoked_keys_get_401(keyed: Keyed):
    record, key = keyed.keys.create("short-lived", "admin")
    assert keyed.request("GET", "/namespaces", key).status_code == 200
    keyed.keys.revoke(record.id)
    for bad in (key, "tdk_000000000000_" + "x" * 43):
        response = keyed.request("GET", "/namespaces", bad)
        error = refused(response, 401)
        assert error["code"] == "invalid_api_key" and "invalid or expired API key" in error["message"]
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert bad not in response.text


def test_reload_takes_no_restricted_key(keyed: Keyed):
    error = refused(keyed.request("POST", "/reload", keyed.project_writer,
                                  **{"X-Manager-Token": "manager-token-0123456789"}))
    assert "bearer token or an admin API key" in error["message"]
    _, admin = keyed.keys.create("admin", "admin")
    response = keyed.request("POST", "/reload", admin, **{"X-Manager-Token": "manager-token-0123456789"})
    assert response.status_code == 200 and response.json()["reloaded"] is True


def _mcp(keyed: Keyed, key: str, url: str, headers: dict[str, str], body: Any, legacy: bool = False) -> Any:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}", **headers}

    async def main() -> Any:
        if legacy:
            async with sse_client(url, headers=headers) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return asyncio.run(main())


@pytest.mark.parametrize("route", ["header", "path", "legacy-sse", "legacy-sse-path"])
def test_mcp_lists_only_the_scope_and_refuses_the_rest(keyed: Keyed, route: str):
    from mcp.shared.exceptions import MCPError

    async def body(session):
        names = sorted(t.name for t in (await session.list_tools()).tools)
        echoed = await session.call_tool("echo", {"text": "mcp"})
        try:
            await session.call_tool("create", {"name": "x"})
            refusal = "no error"
        except MCPError as exc:
            refusal = str(exc)
        return names, echoed, refusal

    url = keyed.gateway.url
    target, headers = {
        "header": (f"{url}/mcp", {"X-Namespace": "project"}),
        "path": (f"{url}/ns/project/mcp", {}),
        "legacy-sse": (f"{url}/sse", {"X-Namespace": "project"}),
        "legacy-sse-path": (f"{url}/ns/project/sse", {}),
    }[route]
    names, echoed, refusal = _mcp(keyed, keyed.project_reader, target, headers, body, legacy=route.startswith("legacy"))
    assert names == ["echo", "list_projects", "slow"]
    assert not echoed.is_error and echoed.structured_content == {"result": "mcp"}
    assert "read-only tools" in refusal


def test_keyed_http_calls_are_logged_by_key_id(keyed: Keyed):
    record, key = keyed.keys.create("logged", "read", ("project",))
    keyed.request("POST", "/tools/echo", key, "project", {"text": "x"})
    keyed.gateway.wait_for(lambda: f"key {record.id}" in keyed.gateway.logs, what="the key's log line")
    assert f"key {record.id} (logged, read) http POST /tools/echo: 200" in keyed.gateway.logs
    assert key not in keyed.gateway.logs


def _open_session(keyed: Keyed, bearer: str) -> str:
    headers = {"Authorization": f"Bearer {bearer}", "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "owner", "version": "1"}}}
    reply = httpx.post(f"{keyed.gateway.url}/ns/project/mcp", json=init, headers=headers, timeout=30)
    assert reply.status_code == 200, reply.text
    session = reply.headers["mcp-session-id"]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx.post(f"{keyed.gateway.url}/ns/project/mcp", json=done, headers={**headers, "Mcp-Session-Id": session},
               timeout=30)
    return session


def _on_session(keyed: Keyed, bearer: str, session: str, body: dict, method: str = "POST") -> httpx.Response:
    headers = {"Authorization": f"Bearer {bearer}", "Accept": "application/json, text/event-stream",
               "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
    if method == "DELETE":
        return httpx.delete(f"{keyed.gateway.url}/ns/project/mcp", headers=headers, timeout=30)
    return httpx.post(f"{keyed.gateway.url}/ns/project/mcp", json=body, headers=headers, timeout=30)


def test_an_mcp_session_serves_only_the_credential_that_opened_it(keyed: Keyed):
    """Another key (even of the same scope) or the bearer token presenting a session's id is answered as if
    the session did not exist (404), on every request; the session serves its own key on."""
    _, other = keyed.keys.create("other-reader", "read", ("project",))
    mine = _open_session(keyed, keyed.project_reader)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    assert _on_session(keyed, keyed.project_reader, mine, call).status_code == 200
    for stranger in (other, TOKEN):
        for body in (call, listing):
            refused = _on_session(keyed, stranger, mine, body)
            assert refused.status_code == 404 and "Session not found" in refused.text, refused.text
        assert _on_session(keyed, stranger, mine, {}, "DELETE").status_code == 404
    lean = _lean_calls(keyed)
    answered = _on_session(keyed, keyed.project_reader, mine, call)
    assert answered.status_code == 200 and '"x"' in answered.text  # still its own key's
    assert _lean_calls(keyed) == lean + 1  # and its calls still take the lean path (the same rule, no SDK)
    token_session = _open_session(keyed, TOKEN)
    assert _on_session(keyed, keyed.project_reader, token_session, call).status_code == 404
    assert _on_session(keyed, TOKEN, token_session, call).status_code == 200


def test_a_legacy_sse_session_serves_only_the_key_that_opened_it(keyed: Keyed):
    import re

    _, other = keyed.keys.create("other-legacy", "read", ("project",))
    url = keyed.gateway.url
    with httpx.stream("GET", f"{url}/ns/project/sse", headers={"Authorization": f"Bearer {keyed.project_reader}"},
                      timeout=30) as stream:
        lines = stream.iter_lines()  # kept: a generator dropped closes the stream, and the session with it
        endpoint = next(line for line in lines if line.startswith("data:"))[5:].strip()
        assert re.search(r"session_id=[0-9a-f]+", endpoint), endpoint
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for stranger in (other, TOKEN):
            refused = httpx.post(url + endpoint, json=ping, headers={"Authorization": f"Bearer {stranger}"},
                                 timeout=30)
            assert refused.status_code == 404, refused.text
        own = httpx.post(url + endpoint, json=ping, headers={"Authorization": f"Bearer {keyed.project_reader}"},
                         timeout=30)
        assert own.status_code == 202, own.text


def _lean_calls(keyed: Keyed) -> float:
    text = keyed.request("GET", "/metrics", TOKEN).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith('tooldock_mcp_lean_requests_total{method="tools/call"'))
