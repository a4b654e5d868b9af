"""Built images in a real Docker engine and a real registry: `--load`, `docker run --network none` with
only the socket directory mounted, `--push` twice (the second uploads nothing), and clear failures."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, require, tooldock_cli, unix_connect


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    src = tmp_path_factory.mktemp("docker-src")
    shutil.copytree(EXAMPLES / "multi-tool", src / "multi-tool", ignore=shutil.ignore_patterns("__pycache__"))
    return src / "multi-tool"


def wait_for_socket(container: Any, sock: Path, timeout: float) -> None:
    """Until the worker in `container` has made its socket `sock` (in a mounted folder); fails with the
    container's logs if it exits or takes longer than `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not sock.exists():
        container.reload()
        assert container.status in ("created", "running"), container.logs().decode()
        assert time.monotonic() < deadline, container.logs().decode()
        time.sleep(0.2)


def _talk(sock_path: Path) -> tuple[dict, dict, dict]:
    client = unix_connect(sock_path)
    stream = client.makefile("rwb")
    ready = json.loads(stream.readline())
    stream.write(b'{"id":"p","op":"ping"}\n{"id":"l","op":"tools.list"}\n')
    stream.flush()
    replies = {r["id"]: r for r in (json.loads(stream.readline()) for _ in range(2))}
    client.close()
    return ready, replies["p"], replies["l"]


def test_load_and_run_with_no_network_and_no_arguments(docker_host, source, tmp_path):
    import docker

    result = json.loads(tooldock_cli("build", str(source), "--output", str(tmp_path / "oci"), "--load", "--json",
                                     env={"DOCKER_HOST": docker_host}).stdout)
    assert result["loaded"] == ["tooldock/multi-tool:latest", f"tooldock/multi-tool:{result['digest'].replace(':', '-')}"]
    client = docker.DockerClient(base_url=docker_host)
    image = client.images.get("tooldock/multi-tool:latest")
    labels = image.labels
    assert labels["io.tooldock.namespace"] == "multi-tool"
    tools = json.loads(labels["io.tooldock.tools"])
    assert image.attrs["Config"]["User"] == "65532:65532"

    # A short socket directory (unix socket paths are limited), writable by the image's non-root user.
    sockets = Path(tempfile.mkdtemp(prefix="tdk-"))
    sockets.chmod(0o777)
    container = client.containers.run("tooldock/multi-tool:latest", detach=True, network_mode="none",
                                      volumes={str(sockets): {"bind": "/run/tooldock", "mode": "rw"}})
    try:
        sock = sockets / "multi-tool.sock"
        wait_for_socket(container, sock, 60)
        ready, ping, listed = _talk(sock)
        container.reload()
        assert container.attrs["HostConfig"]["NetworkMode"] == "none"
    finally:
        container.remove(force=True)
        shutil.rmtree(sockets, ignore_errors=True)
    assert ping["ok"] and ping["result"]["pong"]
    assert ready["tools"] == tools and listed["result"]["tools"] == tools


def test_docker_load_of_the_tar_output(docker_host, source, tmp_path):
    import docker

    tar = tmp_path / "multi-tool.tar"
    result = json.loads(tooldock_cli("build", str(source), "--output", str(tmp_path / "oci"), "--tar", str(tar),
                                     "--json").stdout)
    client = docker.DockerClient(base_url=docker_host)
    with tar.open("rb") as data:
        (image,) = client.images.load(data)
    assert "tooldock/multi-tool:latest" in image.tags
    assert image.id == result["config_digest"]  # the engine's image id is the config digest we wrote


def test_push_twice_second_uploads_nothing(registry, source, tmp_path):
    require("skopeo")
    target = f"{registry}/tools"
    first = json.loads(tooldock_cli("build", str(source), "--output", str(tmp_path / "oci"), "--push", target,
                                    "--json").stdout)
    assert first["pushed"]["reference"] == f"{registry}/tools/multi-tool:latest"
    assert len(first["pushed"]["uploaded"]) + len(first["pushed"]["skipped"]) == 1 + len(first["layers"])
    second = json.loads(tooldock_cli("build", str(source), "--output", str(tmp_path / "oci"), "--push", target,
                                     "--json").stdout)
    assert second["pushed"]["uploaded"] == []
    info = json.loads(subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", f"docker://{registry}/tools/multi-tool:latest"],
        capture_output=True, text=True, check=True).stdout)
    assert info["Digest"] == first["digest"] == second["digest"]


def test_unreachable_registry_and_engine_are_clear_errors(source, tmp_path):
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = tooldock_cli("build", str(source), "--output", str(tmp_path / "oci"), "--push", f"127.0.0.1:{port}/tools",
                        check=False)
    assert proc.returncode == 1 and f"cannot reach registry 127.0.0.1:{port}" in proc.stderr
    proc = tooldock_cli("build", str(source), "--output", str(tmp_path / "oci2"), "--load", check=False,
                        env={"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"})
    assert proc.returncode == 1 and "cannot reach the Docker engine" in proc.stderr
    assert "write the image with --tar or --push instead" in " ".join(proc.stderr.split())  # rich wraps lines
    stop = tooldock_cli("ps", check=False, env={"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"})
    assert stop.returncode == 1 and "start dockerd or set DOCKER_HOST" in stop.stderr and "--tar" not in stop.stderr
    bad = tooldock_cli("build", str(source), "--push", "not a registry", check=False)
    assert bad.returncode == 2 and "REGISTRY/PREFIX" in bad.stderr


def test_base_from_the_engine_and_from_a_registry_give_the_same_image(docker_host, registry, source, tmp_path):
    """--base accepts an OCI layout, an image in the Docker engine, or a registry reference: the same base
    reached three ways must give the same digest."""
    require("skopeo")
    env = {"DOCKER_HOST": docker_host}
    tooldock_cli("base", "--output", str(tmp_path / "base"))
    layout = build_json(source, tmp_path, "--base", str(tmp_path / "base"))
    # Into the engine (the docker route loads the base there under a digest tag) ...
    docker_route = json.loads(tooldock_cli("build", str(source), "--engine", "docker", "--json", env=env).stdout)
    assert docker_route["engine"] == "docker"
    import docker

    # The engine may hold older bases from earlier runs: take the one this base was loaded as.
    base_digest = json.loads((tmp_path / "base" / "index.json").read_text())["manifests"][0]["digest"]
    tag = f"tooldock/base:{base_digest.replace(':', '-')}"
    assert docker.DockerClient(base_url=docker_host).images.get(tag)
    from_engine = build_json(source, tmp_path, "--base", tag, env=env)
    # ... and into a registry.
    subprocess.run(["skopeo", "copy", "-q", "--dest-tls-verify=false", f"oci:{tmp_path / 'base'}",
                    f"docker://{registry}/bases/tooldock-base:v1"], check=True)
    from_registry = build_json(source, tmp_path, "--base", f"{registry}/bases/tooldock-base:v1")
    assert layout["digest"] == from_engine["digest"] == from_registry["digest"]


def test_missing_bases_are_clear_errors(docker_host, registry, source, tmp_path):
    for ref, message in [
        (f"{registry}/bases/nope:v1", "not found in the registry"),
        ("tooldock/no-such-base:1", "no such image in the Docker engine"),
        (str(tmp_path / "no-such-dir"), "no such OCI layout directory"),
    ]:
        proc = tooldock_cli("build", str(source), "--base", ref, "--output", str(tmp_path / "out"), check=False,
                            env={"DOCKER_HOST": docker_host})
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def build_json(source, tmp_path, *args, env=None) -> dict:
    out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
    return json.loads(tooldock_cli("build", str(source), "--output", str(out), "--json", *args, env=env).stdout)


def test_gateway_image_serves_health_on_loopback(docker_host, tmp_path):
    """`tooldock build --gateway`: the gateway's own image runs `tooldock serve`; host networking bound to
    127.0.0.1 (the test's network rule), an empty tools directory, so nothing needs installing."""
    import docker
    import httpx

    result = json.loads(tooldock_cli("build", "--gateway", "--output", str(tmp_path / "oci"), "--load", "--json",
                                     env={"DOCKER_HOST": docker_host}).stdout)
    assert result["namespace"] == "tooldock-gateway" and result["loaded"][0] == "tooldock/gateway:0.1.0"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tools = tmp_path / "tools"
    tools.mkdir()
    client = docker.DockerClient(base_url=docker_host)
    container = client.containers.run(
        "tooldock/gateway:0.1.0", ["serve", "/tools", "--host", "127.0.0.1", "--port", str(port)], detach=True,
        network_mode="host", environment={"TOOLDOCK_BEARER_TOKEN": "gateway-test-token"},
        volumes={str(tools): {"bind": "/tools", "mode": "ro"}}, tmpfs={"/var/lib/tooldock": "uid=65532"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.HTTPError:
                container.reload()
                assert container.status == "running" and time.monotonic() < deadline, container.logs().decode()
                time.sleep(0.3)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert httpx.get(f"http://127.0.0.1:{port}/namespaces").status_code == 401
        assert container.attrs["Config"]["User"] == "65532:65532"
    finally:
        container.remove(force=True)
