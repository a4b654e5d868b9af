"""SSO for the manager (issue 62): with TOOLDOCK_OAUTH_ISSUER the manager is a resource server of its own, next
to the gateway: its protected resource metadata names the issuer and the manager's own resource, and an MCP
client does the MCP OAuth flow against it (the official SDK client: discovery from the 401, dynamic
registration, authorization code + PKCE through the real oidc-provider's login and consent). It takes only a
token for its own resource granting unrestricted admin (`tooldock:admin`): a token for the gateway is refused,
a read token gets 403 insufficient_scope naming tooldock:admin. The bearer token keeps working."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from conftest import MANAGER_ARGS, STATE_DIR, TOKEN, Gateway, manager_url, run_manager
from oauthkit import Person, Provider, TokenMemory, provider_home

pytestmark = pytest.mark.slow
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


class Site:
    def __init__(self, provider: Provider, gateway: Gateway, manager: str) -> None:
        self.provider, self.gateway, self.manager = provider, gateway, manager


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("oauth-manager")
    provider = Provider(provider_home(STATE_DIR), tmp).start()
    (tmp / "tools" / "project").mkdir(parents=True)
    (tmp / "tools" / "project" / "tools.py").write_text(
        "from fastmcp.tools import tool\n\n\n@tool\ndef hello() -> str:\n    return 'hi'\n")
    env = {"TOOLDOCK_OAUTH_ISSUER": provider.issuer, "TOOLDOCK_KEYS_DIR": str(tmp / "keys"),
           "TOOLDOCK_LOG_DIR": str(tmp / "audit"), "MANAGER_INTERNAL_TOKEN": "manager-internal-0123456789"}
    gateway = Gateway(tmp / "tools", tmp / "gateway.log", env, MANAGER_ARGS).start()
    yield Site(provider, gateway, manager_url(gateway))
    gateway.stop()
    provider.stop()


def _challenge(answer: httpx.Response) -> dict[str, str]:
    header = answer.headers.get("www-authenticate", "")
    assert header.startswith("Bearer "), header
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def _post(site: Site, token: str | None) -> httpx.Response:
    headers = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx.post(f"{site.manager}/mcp", json=PING, headers=headers, timeout=30)


def test_the_manager_serves_its_own_protected_resource_metadata(site: Site):
    answer = _post(site, None)
    assert answer.status_code == 401
    url = _challenge(answer)["resource_metadata"]
    assert url == f"{site.manager}/.well-known/oauth-protected-resource/mcp"
    document = httpx.get(url, timeout=10).json()
    assert document["resource"] == f"{site.manager}/mcp" and document["authorization_servers"] == [site.provider.issuer]
    assert site.manager != site.gateway.url


def test_a_token_for_the_gateway_is_not_one_for_the_manager(site: Site):
    token = site.provider.token(f"{site.gateway.url}/mcp", "tooldock:admin")
    answer = _post(site, token)
    assert answer.status_code == 401 and _challenge(answer)["error"] == "invalid_token"
    assert token not in answer.text


def test_a_read_token_for_the_manager_is_403_naming_the_admin_scope(site: Site):
    answer = _post(site, site.provider.token(f"{site.manager}/mcp", "tooldock:read"))
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "insufficient_scope"
    found = _challenge(answer)
    assert found["error"] == "insufficient_scope" and found["scope"] == "tooldock:admin"


def test_an_admin_token_for_the_manager_and_the_bearer_token_work(site: Site):
    token = site.provider.token(f"{site.manager}/mcp", "tooldock:admin")
    assert "list_namespaces" in run_manager(site.manager, lambda call: _tool_names(call), token)
    assert "list_namespaces" in run_manager(site.manager, lambda call: _tool_names(call), TOKEN)


async def _tool_names(call: Any) -> list[str]:
    is_error, listed = await call("list_namespaces")
    assert not is_error, listed
    return ["list_namespaces"]


def test_the_official_sdk_client_signs_in_to_the_manager(site: Site):
    """The MCP OAuth flow against the manager: discovery from its 401, registration, code + PKCE, a token
    for the manager's resource, then tools/list."""
    import httpx2
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import OAuthClientMetadata

    redirect_uri = "http://127.0.0.1:9/callback"  # never reached: the person stops at the redirect
    person, storage = Person(redirect_uri), TokenMemory()
    auth = OAuthClientProvider(
        server_url=f"{site.manager}/mcp",
        client_metadata=OAuthClientMetadata(client_name="manager-client", redirect_uris=[redirect_uri],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method="none"),
        storage=storage, redirect_handler=person.visit, callback_handler=person.callback)

    async def main() -> list[str]:
        async with httpx2.AsyncClient(auth=auth, timeout=60) as http:
            async with streamable_http_client(f"{site.manager}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return [t.name for t in (await session.list_tools()).tools]

    names = asyncio.run(main())
    assert "write_tool" in names and "reload_core" in names
    assert person.prompts == ["login", "consent"]
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["aud"] == f"{site.manager}/mcp" and claims["sub"] == "alice"
    assert "tooldock:admin" in claims["scope"].split()
