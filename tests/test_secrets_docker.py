"""Secrets on the docker backend: a worker container gets its declared values over its socket before it
imports its tools, so no value is in the image, its labels, the container's config or `docker inspect`."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURES, TOOLDOCK, Gateway, tooldock_cli

VAULT_TOKEN = "docker-vault-token-4c2e9a71"
SHARED_KEY = "docker-shared-key-b83f0d16"
MANAGER = "manager-token-0123456789"
ROTATED = "docker-vault-rotated-19e7"  # VAULT_TOKEN once the changed-value test set it


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def secrets_set(env: dict[str, str], key: str, value: str, namespace: str | None = None) -> None:
    args = [TOOLDOCK, "secrets", "set", key, *(["--namespace", namespace] if namespace else [])]
    proc = subprocess.run(args, input=value, capture_output=True, text=True, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def setup(docker_host, tmp_path_factory):
    import docker

    tmp = tmp_path_factory.mktemp("secrets-docker")
    store = {"TOOLDOCK_SECRETS_DIR": str(tmp / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp / "age.key")}
    tooldock_cli("secrets", "init", env=store)
    secrets_set(store, "VAULT_TOKEN", VAULT_TOKEN, "vault")
    secrets_set(store, "SHARED_KEY", SHARED_KEY)
    sockets = Path(tempfile.mkdtemp(prefix="tds-"))
    env = {"DOCKER_HOST": docker_host, "TOOLDOCK_SOCKET_DIR": str(sockets)}
    src = FIXTURES / "secrets"
    deployed = tooldock_cli("deploy", str(src / "vault"), str(src / "plain"), "--json", "--drain", "2", env=env)
    results = {r["namespace"]: r for r in map(json.loads, deployed.stdout.splitlines())}
    gw = Gateway(
        tmp,
        tmp / "gateway.log",
        {**env, **store, "MANAGER_INTERNAL_TOKEN": MANAGER, "TOOLDOCK_RESTART_BACKOFF": "0.2"},
        args=("--backend", "docker"),
    ).start()
    yield {
        "gw": gw,
        "store": store,
        "results": results,
        "client": docker.DockerClient(base_url=docker_host),
        "sockets": sockets,
    }
    gw.stop()
    client = docker.DockerClient(base_url=docker_host)
    for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"}):
        if any(str(m.get("Source", "")).startswith(str(sockets)) for m in container.attrs.get("Mounts") or []):
            container.remove(force=True)


def test_the_container_gets_its_declared_secrets_over_the_socket(setup):
    gw = setup["gw"]
    gw.wait_for(lambda: gw.namespace("vault").get("state") == "ready", what="vault ready")
    assert gw.call("vault", "token_hash").json()["result"] == sha(VAULT_TOKEN)
    assert gw.call("vault", "secret_names").json()["result"] == ["SHARED_KEY", "VAULT_TOKEN"]
    assert gw.call("plain", "secret_names").json()["result"] == []


def test_no_value_in_docker_inspect_the_image_or_its_labels(setup):
    client = setup["client"]
    gw = setup["gw"]
    gw.call("vault", "token_hash")
    container = client.containers.get(setup["results"]["vault"]["container"])
    inspected = json.dumps(container.attrs) + json.dumps(client.api.inspect_image(container.image.id))
    assert "TOOLDOCK_SECRETS_VIA=socket" in inspected  # the names-only switch is there ...
    image = b"".join(container.image.save())
    found_in_layers = []
    with tarfile.open(fileobj=io.BytesIO(image)) as archive:
        for member in archive.getmembers():
            data = archive.extractfile(member) if member.isfile() else None
            if data is None:
                continue
            raw = data.read()
            try:
                layer = tarfile.open(fileobj=io.BytesIO(raw))  # a layer (plain or gzipped tar)
            except tarfile.ReadError:
                continue  # a config or manifest: searched as part of `image` below
            with layer:
                for inner in layer.getmembers():
                    if inner.isfile():
                        content = layer.extractfile(inner).read()  # type: ignore[union-attr]
                        found_in_layers += [v for v in (VAULT_TOKEN, SHARED_KEY) if v.encode() in content]
    assert found_in_layers == []
    logs = container.logs().decode(errors="replace") + gw.logs
    for value in (VAULT_TOKEN, SHARED_KEY):  # ... and no value anywhere
        assert value not in inspected and value.encode() not in image
        assert value not in logs


def test_a_changed_value_restarts_that_container_and_reaches_the_tool(setup):
    gw, store = setup["gw"], setup["store"]
    secrets_set(store, "VAULT_TOKEN", "docker-vault-rotated-19e7", "vault")
    report = gw.post("/reload", headers={"X-Manager-Token": MANAGER}).json()
    assert report["workers_restarted"] == ["vault"], (report["failed"], gw.logs[-1500:])
    answer = gw.call("vault", "token_hash").json()
    assert answer.get("result") == sha("docker-vault-rotated-19e7"), (answer, gw.logs[-2000:])
    assert gw.call("vault", "leak", where="error").json()["error"]["message"].count("***") == 1


def test_deploy_refuses_a_declared_secret_given_as_plain_environment(setup, docker_host, tmp_path):
    """`deploy -e VAULT_TOKEN=...` would put the value where `docker inspect` shows it: refused, for a folder
    before anything is built and for an image before any container starts; the value is never echoed."""
    client = setup["client"]
    env = {"DOCKER_HOST": docker_host, "TOOLDOCK_SOCKET_DIR": str(tmp_path)}
    leaked = "plain-env-value-5be1c0d2"
    before = {c.id for c in client.containers.list(all=True)}
    try:
        folder = tooldock_cli(
            "deploy", str(FIXTURES / "secrets" / "vault"), "-e", f"VAULT_TOKEN={leaked}", env=env, check=False
        )
        assert folder.returncode == 2 and "VAULT_TOKEN is a secret of namespace 'vault'" in folder.stderr
        assert "tooldock secrets set VAULT_TOKEN --namespace vault" in folder.stderr and leaked not in folder.stderr
        image = tooldock_cli(
            "deploy",
            setup["results"]["vault"]["image"],
            "-e",
            f"VAULT_TOKEN={leaked}",
            "-e",
            "HARMLESS=1",
            env=env,
            check=False,
        )
        assert image.returncode == 1 and "VAULT_TOKEN is a secret of namespace 'vault'" in image.stderr
        assert leaked not in image.stderr + image.stdout
        assert {c.id for c in client.containers.list(all=True)} == before
    finally:  # had a deploy gone through, its container would hold the value: never leave it behind
        for container in client.containers.list(all=True):
            if container.id not in before:
                container.remove(force=True)


def test_after_a_changed_secret_the_container_is_restarted_once_and_a_new_gateway_can_reach_it(setup):
    """After the changed-value test's reload: the container was restarted once (the worker it replaced
    neither restarts it again nor connects to it), and a new gateway connects to it and keeps it (the
    replaced worker used to remove the socket file on its way out, so the next gateway never reached it)."""
    gw, client = setup["gw"], setup["client"]

    def vault_containers() -> dict[str, str]:
        found = {}
        for c in client.containers.list(filters={"label": "io.tooldock.namespace=vault"}):
            if any(str(m.get("Source", "")).startswith(str(setup["sockets"])) for m in c.attrs.get("Mounts") or []):
                found[c.id] = c.attrs["State"]["StartedAt"]
        return found

    gw.wait_for(lambda: gw.namespace("vault").get("state") == "ready", what="vault ready")
    assert gw.logs.count("waiting for its 2 secret(s)") == 1, gw.logs[-3000:]  # one restart, one log stream
    before = vault_containers()
    assert len(before) == 1, before
    gw.stop()
    again = Gateway(gw.tools_dir, gw.log_path.with_name("after-change.log"), gw.env, args=gw.args).start()
    setup["gw"] = again  # stopped by the fixture, or by the next test
    again.wait_for(lambda: again.namespace("vault").get("state") == "ready", 30, "vault ready again")
    assert again.call("vault", "token_hash").json()["result"] == sha(ROTATED)
    assert vault_containers() == before, again.logs[-2000:]
    assert "restarting it" not in again.logs


def test_a_gateway_restart_leaves_a_container_with_secrets_running(setup, docker_host, tmp_path):
    """The token naming a container's values is derived from the store's identity, not from the gateway
    process: a new gateway finds the container holds the values it would give and keeps it (it was
    restarted once, for nothing, after every gateway restart). Runs last, on a container of its own: it
    stops the module's gateway and removes the module's containers first (a gateway serves every ToolDock
    container in the engine)."""
    client = setup["client"]
    setup["gw"].stop()
    for container in client.containers.list(all=True, filters={"label": "io.tooldock.namespace"}):
        if any(str(m.get("Source", "")).startswith(str(setup["sockets"])) for m in container.attrs.get("Mounts") or []):
            container.remove(force=True)
    sockets = Path(tempfile.mkdtemp(prefix="tds-"))
    env = {"DOCKER_HOST": docker_host, "TOOLDOCK_SOCKET_DIR": str(sockets)}
    tooldock_cli("deploy", str(FIXTURES / "secrets" / "vault"), "--json", env=env)
    gateway_env = {**setup["gw"].env, **env}

    def vault_containers() -> dict[str, str]:
        found = {}
        for c in client.containers.list(all=True, filters={"label": "io.tooldock.namespace=vault"}):
            if any(str(m.get("Source", "")).startswith(str(sockets)) for m in c.attrs.get("Mounts") or []):
                found[c.id] = c.attrs["State"]["StartedAt"]
        return found

    try:
        first = Gateway(tmp_path, tmp_path / "first.log", gateway_env, args=("--backend", "docker")).start()
        try:
            first.wait_for(lambda: first.namespace("vault").get("state") == "ready", what="vault ready")
            assert first.call("vault", "token_hash").json()["result"] == sha(ROTATED)
            before = vault_containers()
        finally:
            first.stop()
        assert len(before) == 1, before
        again = Gateway(tmp_path, tmp_path / "again.log", gateway_env, args=("--backend", "docker")).start()
        try:
            again.wait_for(lambda: again.namespace("vault").get("state") == "ready", what="vault ready again")
            assert again.call("vault", "token_hash").json()["result"] == sha(ROTATED)
            assert vault_containers() == before, again.logs[-2000:]
            assert "restarting it" not in again.logs
        finally:
            again.stop()
    finally:
        for container_id in vault_containers():
            client.containers.get(container_id).remove(force=True)
