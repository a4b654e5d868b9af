"""An upstream MCP server that takes OAuth (issue 62): the gateway gets its own token for it by the client
credentials grant from the real oidc-provider (tests/oauthkit.py), with the client id and secret from the
secrets store (`oauth = {...}` in tools.toml holds only `${secret:...}` references), fetches a new one before
the old expires, and never sends on the token its own client came with.

The upstream (UPSTREAM below) is a streamable-HTTP server on the official MCP SDK that checks every request's
bearer token against the provider's keys (issuer, its own audience, expiry) and answers `seen` with what it
was sent: a digest of each token, with its subject, client and audience."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import STATE_DIR, TOOLDOCK, Gateway, tooldock_cli
from oauthkit import Provider, free_port, provider_home

from tooldock.namespace.toolsfile import ToolsFileError, parse_tools_file

pytestmark = pytest.mark.slow
CLIENT_SECRET = "upstream-secret-0123456789"
UPSTREAM = '''import hashlib, json, sys
import jwt, uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import JSONResponse

issuer, port = sys.argv[1], int(sys.argv[2])
resource = f"http://127.0.0.1:{port}/mcp"
keys = jwt.PyJWKClient(f"{issuer}/jwks")
seen, revoked, last = [], set(), [""]
app = MCPServer("checker")


@app.tool(description="What this server was sent.")
def seen_tokens() -> str:
    return json.dumps(seen)


@app.tool(description="Refuse from now on the token this call came with (as if its issuer revoked it).")
def revoke() -> str:
    revoked.add(last[0])
    return last[0]


inner = app.streamable_http_app()


async def checked(scope, receive, send):
    if scope["type"] == "http":
        header = dict(scope["headers"]).get(b"authorization", b"").decode()
        token = header.removeprefix("Bearer ")
        last[0] = hashlib.sha256(token.encode()).hexdigest()
        if last[0] in revoked:
            seen.append({"digest": last[0], "refused": "revoked"})
            await JSONResponse({"error": "invalid_token"}, 401)(scope, receive, send)
            return
        try:
            key = keys.get_signing_key_from_jwt(token).key
            claims = jwt.decode(token, key, algorithms=["RS256"], audience=resource, issuer=issuer)
        except Exception as exc:
            seen.append({"digest": hashlib.sha256(token.encode()).hexdigest(), "refused": type(exc).__name__})
            await JSONResponse({"error": "invalid_token"}, 401)(scope, receive, send)
            return
        entry = {"digest": hashlib.sha256(token.encode()).hexdigest(), "sub": claims["sub"],
                 "client_id": claims.get("client_id"), "aud": claims["aud"], "scope": claims.get("scope")}
        if entry not in seen:
            seen.append(entry)
    await inner(scope, receive, send)


uvicorn.run(checked, host="127.0.0.1", port=port, log_level="warning")
'''


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Site:
    def __init__(self, provider: Provider, gateway: Gateway, upstream: str) -> None:
        self.provider, self.gateway, self.upstream = provider, gateway, upstream
        self.resource = f"{gateway.url}/mcp"

    def seen(self, token: str, tool: str = "seen_tokens") -> Any:
        answer = httpx.post(f"{self.gateway.url}/tools/up_{tool}", json={}, timeout=60,
                            headers={"Authorization": f"Bearer {token}", "X-Namespace": "remote"})
        assert answer.status_code == 200, answer.text
        result = answer.json()["result"]
        text = result["result"] if isinstance(result, dict) else result
        return json.loads(text) if tool == "seen_tokens" else text


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("oauth-upstream")
    port = free_port()
    upstream_url = f"http://127.0.0.1:{port}/mcp"
    # tokens live 8 s: the gateway's is fetched again at half its lifetime
    provider = Provider(provider_home(STATE_DIR), tmp, {"UPSTREAM_RESOURCE": upstream_url, "TOKEN_TTL": "8"}).start()
    (tmp / "upstream.py").write_text(UPSTREAM)
    log = open(tmp / "upstream.log", "wb")
    server = subprocess.Popen([sys.executable, str(tmp / "upstream.py"), provider.issuer, str(port)],
                              stdout=log, stderr=log)
    store = {"TOOLDOCK_SECRETS_DIR": str(tmp / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp / "age.key")}
    tooldock_cli("secrets", "init", env=store)
    for name, value in (("UP_CLIENT_ID", "upstream-client"), ("UP_CLIENT_SECRET", CLIENT_SECRET)):
        done = subprocess.run([TOOLDOCK, "secrets", "set", name, "--namespace", "remote"], input=value + "\n",
                              capture_output=True, text=True, env={**os.environ, **store})
        assert done.returncode == 0, done.stderr
    (tmp / "tools" / "remote").mkdir(parents=True)
    (tmp / "tools" / "remote" / "tools.toml").write_text(f'''active_toolsets = ["*"]

[[servers]]
namespace = "up"
url = "{upstream_url}"
oauth = {{ issuer = "{provider.issuer}", client_id = "${{secret:UP_CLIENT_ID}}", client_secret = "${{secret:UP_CLIENT_SECRET}}", scope = "upstream:read" }}
''')
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the upstream listens (a bare connection: no request it would record)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    env = {**store, "TOOLDOCK_OAUTH_ISSUER": provider.issuer, "TOOLDOCK_KEYS_DIR": str(tmp / "keys")}
    gateway = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    gateway.wait_for(lambda: gateway.namespace("remote")["servers"][0]["state"] == "ready", 60, "the upstream")
    yield Site(provider, gateway, upstream_url)
    gateway.stop()
    server.terminate()
    server.wait(timeout=10)
    provider.stop()


def test_the_upstream_sees_only_its_own_token_never_the_clients(site: Site):
    mine = site.provider.token(site.resource, "tooldock:write")
    seen = site.seen(mine)
    accepted = [s for s in seen if "refused" not in s]
    assert accepted and not [s for s in seen if "refused" in s], seen
    # its subject and client are the upstream's own client, whose id is a secret: the gateway masks it in answers
    assert all(s["client_id"] == "***" and s["sub"] == "***" for s in accepted)
    assert all(s["aud"] == site.upstream and s["scope"] == "upstream:read" for s in accepted)
    assert digest(mine) not in {s["digest"] for s in seen}  # the client's token never reached it
    everything = site.gateway.logs + json.dumps(site.gateway.namespace("remote"))
    assert CLIENT_SECRET not in everything


def test_the_upstreams_token_is_fetched_again_before_it_expires(site: Site):
    first = {s["digest"] for s in site.seen(site.provider.token(site.resource, "tooldock:write"))}
    time.sleep(5)  # past half of the 8 s lifetime
    later = site.seen(site.provider.token(site.resource, "tooldock:write"))
    assert not [s for s in later if "refused" in s], later  # never an expired one
    assert {s["digest"] for s in later} - first, "no new token was fetched"


def test_a_token_the_upstream_refuses_is_replaced_at_once(site: Site):
    mine = site.provider.token(site.resource, "tooldock:write")
    refused = site.seen(mine, "revoke")  # the upstream refuses its current token from now on
    later = site.seen(mine)  # the call is answered: its 401 made the gateway fetch a new token and retry
    assert {"digest": refused, "refused": "revoked"} in later
    newest = [s for s in later if "refused" not in s][-1]
    assert newest["digest"] != refused and newest["aud"] == site.upstream


def test_oauth_in_tools_toml_takes_only_secret_references():
    base = {"namespace": "up", "url": "https://docs.example.com/mcp"}
    with pytest.raises(ToolsFileError, match="client_secret must be a secret reference"):
        parse_tools_file({"servers": [{**base, "oauth": {"token_url": "https://l.example.com/token",
                                                         "client_id": "a", "client_secret": "in-clear"}}]})
    with pytest.raises(ToolsFileError, match="one of issuer or token_url"):
        parse_tools_file({"servers": [{**base, "oauth": {"client_id": "a", "client_secret": "${secret:S}"}}]})
    with pytest.raises(ToolsFileError, match="only applies to a url server"):
        parse_tools_file({"servers": [{"namespace": "c", "command": "x", "oauth": {
            "issuer": "https://l.example.com", "client_id": "a", "client_secret": "${secret:S}"}}]})
    ok = parse_tools_file({"servers": [{**base, "oauth": {"issuer": "https://l.example.com", "client_id": "a",
                                                          "client_secret": "${secret:S}"}}]})
    assert ok.secret_names() == ("S",)


def test_a_wrong_client_secret_is_reported_without_the_secret(tmp_path: Path):
    import asyncio

    from tooldock.namespace.toolsfile import UpstreamServer
    from tooldock.upstream.clientcreds import ClientCredentialsError, client_credentials

    spec = UpstreamServer("up", url="http://127.0.0.1:9/mcp",
                          oauth=(("token_url", "http://127.0.0.1:9/token"), ("client_id", "a"),
                                 ("client_secret", "${secret:S}")))
    with pytest.raises(ClientCredentialsError, match="needs the secret"):
        client_credentials(spec, {})
    creds = client_credentials(spec, {"S": "very-secret-value"})
    assert creds is not None and "very-secret-value" not in repr(creds)
    with pytest.raises(ClientCredentialsError) as raised:
        asyncio.run(creds.token())
    assert "very-secret-value" not in str(raised.value) and "cannot be reached" in str(raised.value)
