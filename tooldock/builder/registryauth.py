"""Registry credentials, and the challenges they answer (`--push`, and `--base` from a registry).

The credentials for a registry host, the first found:

1. TOOLDOCK_REGISTRY_USERNAME and TOOLDOCK_REGISTRY_PASSWORD (for every registry);
2. Docker's client config, `$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`), as `docker login`
   leaves it: the host's credential helper (`credHelpers`), its `auths` entry (`auth`, base64 of
   `user:password`), then the default credential store (`credsStore`). A helper is the program
   `docker-credential-<name>`, asked with `get` and the host on stdin;
3. none: anonymous.

They are looked up when a registry first challenges (a 401), not before. A registry that still answers 401
with them is an error naming where they came from, never what they are. Identity tokens (OAuth refresh
tokens some registries' `docker login` stores) are not supported: the error says to use a password or
access token instead.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import subprocess
from collections.abc import Generator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import httpx

from tooldock.errors import BuilderError

HELPER_TIMEOUT = 30  # seconds a credential helper may take
_HELPER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
ENV_NAMES = "TOOLDOCK_REGISTRY_USERNAME and TOOLDOCK_REGISTRY_PASSWORD"
SET_ENV = f"set {ENV_NAMES}, or `docker login` to it"


class RegistryError(BuilderError):
    pass


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str
    source: str  # where they came from, for errors: never the values

    def basic(self) -> str:
        return "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()


def docker_config_path() -> Path:
    base = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    return Path(base).expanduser() / "config.json"


def _host_of(key: str) -> str:
    """An `auths` key as `docker login` wrote it (`host[:port]`, `https://host/v1/`) -> `host[:port]`."""
    return re.sub(r"^[a-z]+://", "", key.strip()).split("/", 1)[0].lower()


def _same_registry(key: str, host: str) -> bool:
    found, host = _host_of(key), host.lower()
    return found == host or (found in _DOCKER_HUB and host in _DOCKER_HUB)


def _from_helper(name: str, host: str, where: str) -> Credentials | None:
    if not _HELPER_NAME.match(name):
        raise RegistryError(f"{where}: credential helper name {name[:60]!r} is not a program name")
    program = f"docker-credential-{name}"
    if shutil.which(program) is None:
        raise RegistryError(
            f"{where} names the credential helper {program} for {host}, which is not on PATH: install it, or {SET_ENV}"
        )
    try:
        done = subprocess.run(
            [program, "get"], input=host, capture_output=True, text=True, timeout=HELPER_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise RegistryError(f"credential helper {program} gave no answer for {host} in {HELPER_TIMEOUT}s") from None
    if done.returncode != 0:
        if "credentials not found" in (done.stdout + done.stderr).lower():
            return None
        raise RegistryError(
            f"credential helper {program} failed for {host} (exit {done.returncode}); "
            f"run `echo {host} | {program} get` to see why"
        )
    try:
        answer = json.loads(done.stdout)
        user, secret = answer["Username"], answer["Secret"]
    except (ValueError, KeyError, TypeError):
        raise RegistryError(f"credential helper {program} answered for {host} with no Username and Secret") from None
    if not isinstance(user, str) or not isinstance(secret, str):
        raise RegistryError(f"credential helper {program} answered for {host} with no Username and Secret")
    return _checked(user, secret, f"credential helper {program}", host)


def _checked(user: str, secret: str, source: str, host: str) -> Credentials:
    if user == "<token>":
        raise RegistryError(
            f"{source} holds an identity token for {host}, which ToolDock cannot use: log in with a password or "
            f"access token, or set {ENV_NAMES}"
        )
    return Credentials(user, secret, source)


def _from_auths(entry: Any, host: str, where: str) -> Credentials | None:
    if not isinstance(entry, dict):
        return None
    source = f"{where} (auths)"
    if entry.get("identitytoken"):
        return _checked("<token>", "", source, host)
    if isinstance(entry.get("auth"), str) and entry["auth"]:
        try:
            user, sep, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise RegistryError(f"{where}: the auths entry for {host} is not base64 of user:password") from None
        if not sep:
            raise RegistryError(f"{where}: the auths entry for {host} is not base64 of user:password")
        return _checked(user, password, source, host)
    if isinstance(entry.get("username"), str) and isinstance(entry.get("password"), str):
        return _checked(entry["username"], entry["password"], source, host)
    return None


def credentials_for(host: str) -> Credentials | None:
    user, password = os.environ.get("TOOLDOCK_REGISTRY_USERNAME"), os.environ.get("TOOLDOCK_REGISTRY_PASSWORD")
    if user:
        return Credentials(user, password or "", "TOOLDOCK_REGISTRY_USERNAME / TOOLDOCK_REGISTRY_PASSWORD")
    path = docker_config_path()
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or "not JSON"
        raise RegistryError(f"cannot read Docker's config {path} ({reason}); fix it, or {SET_ENV}") from None
    if not isinstance(config, dict):
        raise RegistryError(f"Docker's config {path} is not a JSON object; fix it, or {SET_ENV}")
    helpers = config.get("credHelpers")
    for key, name in (helpers if isinstance(helpers, dict) else {}).items():
        if _same_registry(key, host) and isinstance(name, str):
            return _from_helper(name, host, str(path))
    auths = config.get("auths")
    for key, entry in (auths if isinstance(auths, dict) else {}).items():
        if _same_registry(key, host) and (found := _from_auths(entry, host, str(path))) is not None:
            return found
    store = config.get("credsStore")
    if isinstance(store, str) and store:
        return _from_helper(store, host, str(path))
    return None


class RegistryAuth(httpx.Auth):
    """Answers a registry's Bearer (token) and Basic challenges with `credentials_for(host)`."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.header: str | None = None

    @cached_property
    def credentials(self) -> Credentials | None:
        """Looked up at the first challenge, then kept (a lookup that raised is tried again)."""
        return credentials_for(self.host)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self.header:
            request.headers["Authorization"] = self.header
        response = yield request
        if response.status_code != 401:
            return
        challenge = response.headers.get("www-authenticate", "")
        scheme, _, params = challenge.partition(" ")
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        found = self.credentials
        if scheme.lower() == "bearer" and "realm" in fields:
            query = {k: v for k, v in fields.items() if k in ("service", "scope")}
            headers = {"Authorization": found.basic()} if found else {}
            token_response = yield httpx.Request("GET", fields["realm"], params=query, headers=headers)
            if token_response.status_code != 200:
                raise self._refused(found, f"its token service answered {token_response.status_code}")
            try:
                body = token_response.json()
                self.header = f"Bearer {body.get('token') or body.get('access_token')}"
            except (ValueError, AttributeError):
                raise RegistryError(f"registry {self.host}'s token service answered with no token") from None
        elif scheme.lower() == "basic" and found:
            self.header = found.basic()
        else:
            raise RegistryError(f"registry {self.host} wants credentials: {SET_ENV}")
        request.headers["Authorization"] = self.header
        response = yield request
        if response.status_code == 401:
            raise self._refused(found, "401")

    def _refused(self, found: Credentials | None, how: str) -> RegistryError:
        if found is None:
            return RegistryError(f"registry {self.host} refused anonymous access ({how}): {SET_ENV}")
        return RegistryError(f"registry {self.host} refused the credentials from {found.source} ({how})")
