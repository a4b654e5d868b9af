"""`tooldock deploy`, `tooldock ps`, `tooldock stop`: worker containers in the local Docker engine.

Deploying starts the new container next to the old one (a new generation), waits until its worker answers
on its socket, and only then lets the old one go: a gateway on the docker backend switches to the newest
generation, drains the old worker and removes its container; without a gateway, deploy removes it itself
after `drain` seconds. A container that never becomes ready is removed, and the old one keeps serving.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from tooldock.errors import DeployError
from tooldock.namespace.models import INLINE_REFS_ENV
from tooldock.runtime.backends.containers import (
    LABEL_MANAGED,
    LABEL_NAMESPACE,
    container_name,
    engine_path,
    generation,
    image_contract,
    local_path,
    mounted_socket_dir,
    remove_socket_dir,
    run_settings,
    socket_dir_for,
    worker_containers,
)


def _handshake(sock: Path, timeout: float) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(timeout)
        client.connect(str(sock))
        with client.makefile("rb") as stream:
            return json.loads(stream.readline())


def refuse_secret_env(namespace: str, secrets: tuple[str, ...] | list[str], env: dict[str, str]) -> None:
    """A value for a declared secret given as plain environment (`deploy -e`) would be readable by anyone
    who can `docker inspect` the container: refused, pointing at the store the gateway delivers from."""
    named = sorted(set(env) & set(secrets))
    if named:
        one = len(named) == 1
        raise DeployError(
            f"{', '.join(named)} {'is a secret' if one else 'are secrets'} of namespace {namespace!r}: a value "
            f"given with -e would be readable in `docker inspect`; store {'it' if one else 'each'} with "
            f"`tooldock secrets set {named[0] if one else 'NAME'} --namespace {namespace}` (the gateway hands "
            "secrets to the container over its socket) and deploy without -e for it"
        )


def deploy_image(
    client: Any, ref: str, root: Path, env: dict[str, str] | None = None, wait: float = 60.0, drain: float = 30.0
) -> dict[str, Any]:
    from docker.errors import DockerException, ImageNotFound

    from tooldock.runtime.backends.signedonly import check_engine_image

    try:
        image = client.images.get(ref)
    except ImageNotFound:
        raise DeployError(f"no image {ref!r} in the Docker engine; build it with `tooldock build --load`") from None
    namespace, config, tools = image_contract(image.labels, f"image {ref!r}")
    refuse_secret_env(namespace, config.secrets, env or {})
    check_engine_image(image, ref)  # signed-only mode (TOOLDOCK_REQUIRE_SIGNED_BY); nothing when unset
    old = worker_containers(client, namespace)
    gen = max((generation(c) for c in old), default=0) + 1
    name = container_name(namespace, gen)
    sockets = socket_dir_for(root, name)
    asked = {INLINE_REFS_ENV: os.environ[INLINE_REFS_ENV]} if os.environ.get(INLINE_REFS_ENV) else {}  # as listed
    env = {**asked, **dict(config.env), **(env or {})}
    try:
        settings = run_settings(config, engine_path(client, sockets), name, gen, env)
        container = client.containers.run(image.id, **settings)
    except DockerException as exc:
        remove_socket_dir(root, name)
        raise DeployError(f"docker could not start {name}: {exc}") from None
    sock = sockets / f"{namespace}.sock"
    deadline = time.monotonic() + wait
    while True:
        try:
            ready = _handshake(sock, 5)
            break
        except (OSError, ValueError):
            container.reload()
            if container.status not in ("created", "running") or time.monotonic() > deadline:
                logs = container.logs(tail=20).decode(errors="replace").strip()
                container.remove(force=True)
                remove_socket_dir(root, name)
                raise DeployError(
                    f"{name} did not become ready ({container.status}); the previous version keeps serving.\n{logs}"
                ) from None
            time.sleep(0.1)
    replaced = _retire(client, [c for c in old if c.labels.get(LABEL_MANAGED) == "true"], root, drain)
    return {
        "namespace": namespace,
        "container": name,
        "id": container.id,
        "image": image.id,
        "generation": gen,
        "tools": [t["name"] for t in ready.get("tools") or tools],
        "replaced": replaced,
    }


def _retire(client: Any, old: list[Any], root: Path, drain: float) -> list[str]:
    """Give a gateway `drain` seconds to switch over and remove the old containers; then do it here."""
    from docker.errors import APIError, NotFound

    names = [c.name for c in old]
    deadline = time.monotonic() + drain
    for container in old:
        while time.monotonic() < deadline:
            try:
                container.reload()
            except NotFound:
                break
            if container.status != "running":
                break
            time.sleep(0.2)
        try:
            container.remove(force=True)
        except NotFound:
            pass
        except APIError as exc:  # 409: the gateway is removing it right now
            if exc.status_code != 409:
                raise
        remove_socket_dir(root, container.name)
    return names


def ps(client: Any) -> list[dict[str, Any]]:
    rows = []
    for c in sorted(worker_containers(client), key=lambda c: (c.labels.get(LABEL_NAMESPACE, ""), generation(c))):
        mounted = mounted_socket_dir(c)
        sockets = local_path(client, mounted) if mounted else None
        ns = c.labels.get(LABEL_NAMESPACE, "")
        rows.append(
            {
                "namespace": ns,
                "container": c.name,
                "generation": generation(c),
                "status": c.status,
                "image": c.image.id if c.image else None,
                "tags": c.image.tags if c.image else [],
                "socket": str(sockets / f"{ns}.sock") if sockets else None,
                "healthy": bool(sockets and (sockets / f"{ns}.sock").exists() and c.status == "running"),
            }
        )
    return rows


def stop(client: Any, namespace: str, root: Path) -> list[str]:
    containers = worker_containers(client, namespace)
    if not containers:
        raise DeployError(f"no worker container for namespace {namespace!r} (tooldock ps lists them)")
    for c in containers:
        c.remove(force=True)
        remove_socket_dir(root, c.name)
    return [c.name for c in containers]
