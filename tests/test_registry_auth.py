"""Registry credentials for `tooldock build --push` (and `--base` pulls), against Debian's docker-registry
asking for a password (htpasswd): from TOOLDOCK_REGISTRY_USERNAME / _PASSWORD, from Docker's config as
`docker login` writes it (a real `docker login` through the test engine too), from a credential helper;
wrong, missing and unusable credentials are clear errors that never show the password."""

from __future__ import annotations

import base64
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES, serve_registry, tooldock_cli

from tooldock.builder.blobs import BlobStore
from tooldock.builder.registry import pull
from tooldock.builder.registryauth import RegistryError

USER, PASSWORD = "alice", "pw-Registry-8c1f0e"
NO_ENV = {"TOOLDOCK_REGISTRY_USERNAME": "", "TOOLDOCK_REGISTRY_PASSWORD": ""}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    address, proc = serve_registry(tmp_path_factory.mktemp("guarded-registry"), {USER: PASSWORD})
    yield address
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """multi-tool's source and an output folder it was built into once (later builds are cached)."""
    src = tmp_path_factory.mktemp("auth-src") / "multi-tool"
    shutil.copytree(EXAMPLES / "multi-tool", src, ignore=shutil.ignore_patterns("__pycache__"))
    out = src.parent / "oci"
    tooldock_cli("build", str(src), "--output", str(out))
    return src, out


def push(built: tuple[Path, Path], target: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    src, out = built
    proc = tooldock_cli("build", str(src), "--output", str(out), "--push", target, "--json", env=env, check=False)
    assert PASSWORD not in proc.stdout + proc.stderr
    return proc


def docker_config(tmp: Path, config: dict) -> dict[str, str]:
    folder = tmp / "docker-config"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return {**NO_ENV, "DOCKER_CONFIG": str(folder)}


def helper(tmp: Path, name: str, script: str) -> str:
    """A credential helper `docker-credential-<name>` (the protocol: `get`, the host on stdin, JSON out);
    the PATH that finds it."""
    folder = tmp / "bin"
    folder.mkdir(exist_ok=True)
    program = folder / f"docker-credential-{name}"
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


def test_credentials_from_the_environment(guarded: str, built, tmp_path: Path):
    empty = docker_config(tmp_path, {})
    ok = push(built, f"{guarded}/env", {**empty, "TOOLDOCK_REGISTRY_USERNAME": USER,
                                        "TOOLDOCK_REGISTRY_PASSWORD": PASSWORD})
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["pushed"]["reference"] == f"{guarded}/env/multi-tool:latest"

    wrong = push(built, f"{guarded}/env", {**empty, "TOOLDOCK_REGISTRY_USERNAME": USER,
                                           "TOOLDOCK_REGISTRY_PASSWORD": "not-" + PASSWORD})
    assert wrong.returncode == 1 and "not-" + PASSWORD not in wrong.stderr
    assert (f"registry {guarded} refused the credentials from TOOLDOCK_REGISTRY_USERNAME / "
            "TOOLDOCK_REGISTRY_PASSWORD (401)") in wrong.stderr
    none = push(built, f"{guarded}/env", empty)
    assert none.returncode == 1 and "Traceback" not in none.stderr
    assert (f"registry {guarded} wants credentials: set TOOLDOCK_REGISTRY_USERNAME and "
            "TOOLDOCK_REGISTRY_PASSWORD, or `docker login` to it") in none.stderr


def test_credentials_from_dockers_config_auths(guarded: str, built, tmp_path: Path):
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    env = docker_config(tmp_path, {"auths": {"other.example:5000": {"auth": "eDp5"}, f"http://{guarded}/v2/": {"auth": auth}}})
    ok = push(built, f"{guarded}/auths", env)
    assert ok.returncode == 0, ok.stderr
    # The same credentials pull it back (`--base` from a registry).
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        image = pull(BlobStore(tmp_path / "pulled"), f"{guarded}/auths/multi-tool:latest",
                     {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine()))
        assert image.manifest_digest == json.loads(ok.stdout)["digest"]
        patch.setenv("DOCKER_CONFIG", str(tmp_path / "nowhere"))
        with pytest.raises(RegistryError, match="wants credentials"):
            pull(BlobStore(tmp_path / "pulled"), f"{guarded}/auths/multi-tool:latest", "amd64")

    wrong = base64.b64encode(f"{USER}:nope".encode()).decode()
    refused = push(built, f"{guarded}/auths", docker_config(tmp_path, {"auths": {guarded: {"auth": wrong}}}))
    config = tmp_path / "docker-config" / "config.json"
    assert refused.returncode == 1 and f"refused the credentials from {config} (auths) (401)" in refused.stderr
    garbled = push(built, f"{guarded}/auths", docker_config(tmp_path, {"auths": {guarded: {"auth": "%%%"}}}))
    assert garbled.returncode == 1 and f"the auths entry for {guarded} is not base64 of user:password" in garbled.stderr
    token = push(built, f"{guarded}/auths", docker_config(tmp_path, {"auths": {guarded: {"identitytoken": "abc"}}}))
    assert token.returncode == 1 and "holds an identity token" in token.stderr
    (tmp_path / "docker-config" / "config.json").write_text("{not json")
    broken = push(built, f"{guarded}/auths", {**NO_ENV, "DOCKER_CONFIG": str(tmp_path / "docker-config")})
    assert broken.returncode == 1 and f"cannot read Docker's config {config} (not JSON)" in broken.stderr


def test_credentials_from_a_credential_helper(guarded: str, built, tmp_path: Path):
    answer = json.dumps({"ServerURL": guarded, "Username": USER, "Secret": PASSWORD})
    path = helper(tmp_path, "tdktest", f'read host\n[ "$1" = get ] && [ "$host" = "{guarded}" ] || exit 3\n'
                                       f"echo '{answer}'\n")
    helper(tmp_path, "empty", "echo 'credentials not found in native keychain'\nexit 1\n")
    helper(tmp_path, "broken", "echo 'something went wrong' >&2\nexit 7\n")
    for config in ({"credHelpers": {guarded: "tdktest"}}, {"credsStore": "tdktest"},
                   {"credHelpers": {guarded: "tdktest"}, "auths": {guarded: {"auth": "eDp5"}}}):  # the helper wins
        ok = push(built, f"{guarded}/helper", {**docker_config(tmp_path, config), "PATH": path})
        assert ok.returncode == 0, (config, ok.stderr)

    not_found = push(built, f"{guarded}/helper", {**docker_config(tmp_path, {"credsStore": "empty"}), "PATH": path})
    assert not_found.returncode == 1 and f"registry {guarded} wants credentials" in not_found.stderr
    failing = push(built, f"{guarded}/helper", {**docker_config(tmp_path, {"credsStore": "broken"}), "PATH": path})
    assert failing.returncode == 1
    assert f"credential helper docker-credential-broken failed for {guarded} (exit 7)" in failing.stderr
    missing = push(built, f"{guarded}/helper", {**docker_config(tmp_path, {"credHelpers": {guarded: "absent"}}),
                                                "PATH": path})
    assert missing.returncode == 1 and "docker-credential-absent" in missing.stderr and "not on PATH" in missing.stderr


def test_credentials_from_a_real_docker_login(docker_host: str, guarded: str, built, tmp_path: Path):
    """`docker login` (Debian's docker CLI, through the test engine) writes Docker's config; the push reads it."""
    folder = tmp_path / "login"
    folder.mkdir()
    env = {**os.environ, "DOCKER_HOST": docker_host, "DOCKER_CONFIG": str(folder)}
    login = subprocess.run(["docker", "login", guarded, "--username", USER, "--password-stdin"], input=PASSWORD,
                           capture_output=True, text=True, env=env, timeout=60)
    assert login.returncode == 0, login.stderr
    assert PASSWORD not in (folder / "config.json").read_text()  # base64 of it, as Docker keeps it
    ok = push(built, f"{guarded}/login", {**NO_ENV, "DOCKER_CONFIG": str(folder)})
    assert ok.returncode == 0, ok.stderr
