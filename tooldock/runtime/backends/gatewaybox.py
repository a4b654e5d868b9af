"""The gateway in a container (`tooldock deploy --gateway`): the docker backend with host networking on
`host:port`, the Docker socket and the worker socket directory mounted (at the same path, so the workers'
mounts line up), and the bearer token as a read-only file. One description of that container (`spec`)
is run with docker-py (`deploy_gateway`) or written as a compose file (`compose_text`) for operators who
run it with `docker compose`, so the two cannot drift apart.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import yaml

from tooldock.atomic import atomic_write
from tooldock.errors import DeployError

GATEWAY_NAME = "tooldock-gateway"
SECRETS_MOUNT = "/run/secrets/tooldock"  # in the gateway container: its bearer token file (read-only)
TOKEN_NAME = "bearer_token"


def gateway_token_file(folder: Path, token: str, gid: int) -> Path:
    """The bearer token as a file the gateway container reads (TOOLDOCK_BEARER_TOKEN_FILE), so it is not in
    the container's environment, which `docker inspect` shows. Readable by the owner and by `gid`, the Docker
    socket's group, which the container gets (whoever is in it can reach the socket, and so the token,
    anyway); written whole, then renamed into place."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.chown(folder, -1, gid)
        folder.chmod(0o750)
        atomic_write(folder / TOKEN_NAME, token.encode(), mode=0o440, group=gid)
    except PermissionError as exc:
        raise DeployError(
            f"cannot give {folder} to the Docker socket's group {gid} ({exc.strerror}): run deploy as root or as a "
            "member of that group"
        ) from None
    return folder / TOKEN_NAME


def spec(image_ref: str, root: Path, docker_socket: Path, host: str, port: int, secrets_dir: Path) -> dict[str, Any]:
    """The gateway container as docker-py's `containers.run` keyword arguments."""
    return {
        "image": image_ref,
        "command": ["serve", "--backend", "docker", "--host", host, "--port", str(port)],
        "name": GATEWAY_NAME,
        "network_mode": "host",
        # uid 65532 plus the Docker socket's group: it can use the socket, and read the workers' socket
        # directories and its token file, without being root.
        "user": "65532:65532",
        "group_add": [str(docker_socket.stat().st_gid)],
        "read_only": True,
        "tmpfs": {"/tmp": "rw,nosuid,nodev,noexec,size=64m"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "environment": {
            "TOOLDOCK_BEARER_TOKEN_FILE": f"{SECRETS_MOUNT}/{TOKEN_NAME}",
            "TOOLDOCK_SOCKET_DIR": str(root),
            "DOCKER_HOST": "unix:///var/run/docker.sock",
            "TOOLDOCK_STATE_DIR": "/tmp/tooldock",
        },
        "volumes": {
            str(docker_socket): {"bind": "/var/run/docker.sock", "mode": "rw"},
            str(root): {"bind": str(root), "mode": "rw"},
            str(secrets_dir): {"bind": SECRETS_MOUNT, "mode": "ro"},
        },
        "labels": {"io.tooldock.gateway": "true"},
    }


def compose_text(container: dict[str, Any]) -> str:
    """`spec` as a compose file (the Compose Specification, which `docker compose` and docker-compose 1.27+
    read): one service, `restart: unless-stopped`."""
    service = {
        "image": container["image"],
        "container_name": container["name"],
        "command": container["command"],
        "network_mode": container["network_mode"],
        "user": container["user"],
        "group_add": container["group_add"],
        "read_only": container["read_only"],
        "tmpfs": [f"{path}:{options}" for path, options in container["tmpfs"].items()],
        "cap_drop": container["cap_drop"],
        "security_opt": container["security_opt"],
        "environment": container["environment"],
        "volumes": [f"{host}:{m['bind']}:{m['mode']}" for host, m in container["volumes"].items()],
        "labels": container["labels"],
        "restart": "unless-stopped",
    }
    head = "# Written by `tooldock deploy --gateway --compose`; run it with `docker compose -f <this file> up -d`.\n"
    return head + yaml.safe_dump({"services": {"gateway": service}}, sort_keys=False)


def deploy_gateway(client: Any, container: dict[str, Any], url: str, wait: float = 60.0) -> dict[str, Any]:
    """Run `container` (a `spec`), replacing an earlier one, and wait until `url`/health answers."""
    import httpx
    from docker.errors import DockerException, NotFound

    try:
        client.containers.get(GATEWAY_NAME).remove(force=True)
    except NotFound:
        pass
    try:
        running = client.containers.run(detach=True, **container)
    except DockerException as exc:
        raise DeployError(f"docker could not start the gateway: {exc}") from None
    deadline = time.monotonic() + wait
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        running.reload()
        if running.status != "running" or time.monotonic() > deadline:
            logs = running.logs(tail=20).decode(errors="replace").strip()
            raise DeployError(f"the gateway container did not come up ({running.status}):\n{logs}")
        time.sleep(0.2)
    return {"container": GATEWAY_NAME, "id": running.id, "url": url}
