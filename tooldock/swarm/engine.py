"""The Docker engine calls of `tooldock swarm`: the swarm checked, secrets and configs made (from memory,
never from a file), `docker stack deploy` and `docker stack rm` run, the services' state read.

Everything the stack owns carries the label `com.docker.stack.namespace=STACK` (services, networks, volumes:
Docker puts it there) or `io.tooldock.stack=STACK` (the secrets and configs made here), so `down` finds all of
it and nothing else.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STACK_LABEL, OWN_LABEL = "com.docker.stack.namespace", "io.tooldock.stack"


class SwarmError(Exception):
    """Said to the user as it is: what is wrong and what to do."""


def client() -> Any:
    import docker

    try:
        engine = docker.from_env()
        engine.ping()
    except Exception as exc:  # docker-py raises several types for an engine that cannot be reached
        raise SwarmError(
            f"cannot reach the Docker engine ({os.environ.get('DOCKER_HOST') or 'the default socket'}): {exc}"
        ) from None
    return engine


def check_manager(engine: Any) -> None:
    swarm = (engine.info() or {}).get("Swarm") or {}
    if swarm.get("LocalNodeState") != "active":
        raise SwarmError(
            "this Docker engine is not in a swarm: run `docker swarm init` (one node) or join one, then again"
        )
    if not swarm.get("ControlAvailable"):
        raise SwarmError("this node is a swarm worker: run tooldock swarm on a manager node (docker node ls there)")


def docker_cli() -> str:
    found = shutil.which("docker")
    if found is None:
        raise SwarmError("the `docker` command is needed for `docker stack deploy` (Debian: apt-get install docker.io)")
    return found


def ensure_secrets(engine: Any, stack: str, wanted: dict[str, bytes]) -> list[str]:
    """Each named secret made unless there; the names made."""
    have = {s.name for s in engine.secrets.list(filters={"label": f"{OWN_LABEL}={stack}"})}
    made = []
    for name, data in sorted(wanted.items()):
        if name not in have:
            engine.secrets.create(name=name, data=data, labels={OWN_LABEL: stack})
            made.append(name)
    return made


def ensure_configs(engine: Any, stack: str, wanted: dict[str, bytes]) -> None:
    have = {c.name for c in engine.configs.list(filters={"label": f"{OWN_LABEL}={stack}"})}
    for name, data in sorted(wanted.items()):
        if name not in have:
            engine.configs.create(name=name, data=data, labels={OWN_LABEL: stack})


def existing_secrets(engine: Any, stack: str) -> set[str]:
    return {s.name for s in engine.secrets.list(filters={"label": f"{OWN_LABEL}={stack}"})}


def prune(engine: Any, stack: str, keep: set[str]) -> list[str]:
    """The stack's secrets and configs no service uses any more (superseded values) removed."""
    removed = []
    for item in [
        *engine.secrets.list(filters={"label": f"{OWN_LABEL}={stack}"}),
        *engine.configs.list(filters={"label": f"{OWN_LABEL}={stack}"}),
    ]:
        if item.name not in keep:
            try:
                item.remove()
                removed.append(item.name)
            except Exception:  # still in use by a task that is going away: the next run removes it
                pass
    return removed


def services(engine: Any, stack: str) -> list[Any]:
    return sorted(engine.services.list(filters={"label": f"{STACK_LABEL}={stack}"}), key=lambda s: s.name)


def images(engine: Any, stack: str) -> dict[str, str]:
    """Service name (without the stack's prefix): its image reference."""
    found = {}
    for service in services(engine, stack):
        spec = service.attrs["Spec"]
        found[spec["Name"].removeprefix(f"{stack}_")] = spec["TaskTemplate"]["ContainerSpec"]["Image"]
    return found


def deploy(stack: str, stack_file: Path) -> None:
    command = [docker_cli(), "stack", "deploy", "--prune", "--resolve-image", "never", "-c", str(stack_file), stack]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SwarmError(f"`docker stack deploy` failed (exit {proc.returncode}): {proc.stderr.strip()[-1500:]}")


def service_state(service: Any) -> dict[str, Any]:
    spec = service.attrs["Spec"]
    desired = ((spec.get("Mode") or {}).get("Replicated") or {}).get("Replicas", 0)
    tasks = service.tasks(filters={"desired-state": "running"})
    running = [t for t in tasks if (t.get("Status") or {}).get("State") == "running"]
    update = (service.attrs.get("UpdateStatus") or {}).get("State", "")
    errors = sorted({(t.get("Status") or {}).get("Err", "") for t in service.tasks()} - {""})
    image = spec["TaskTemplate"]["ContainerSpec"]["Image"]
    return {
        "service": spec["Name"],
        "replicas": f"{len(running)}/{desired}",
        "ready": len(running) == desired and update not in ("updating", "rollback_started"),
        "update": update or "-",
        "image": image.partition("@")[0],
        "digest": image.partition("@")[2],
        "errors": errors[-2:],
    }


def wait_ready(engine: Any, stack: str, timeout: float, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Until every service runs its replicas, healthy (a task counts as running once its health check passed)
    and no update is under way; raises SwarmError with the services' state at the deadline."""
    deadline, last = time.monotonic() + timeout, ""
    while True:
        states = [service_state(s) for s in services(engine, stack)]
        if states and all(s["ready"] for s in states):
            return states
        line = ", ".join(f"{s['service']} {s['replicas']}" for s in states if not s["ready"])
        if line != last:
            say(f"waiting: {line}")
            last = line
        failed = [s for s in states if s["update"] in ("rollback_completed", "rollback_paused", "paused")]
        if failed or time.monotonic() > deadline:
            states = failed or states
            told = "; ".join(f"{s['service']} {s['replicas']} {s['update']} {' '.join(s['errors'])}" for s in states)
            why = "an update failed and was rolled back" if failed else f"the stack is not ready after {timeout:.0f} s"
            raise SwarmError(f"{why}: {told}; see `docker stack ps {stack}` and `docker service logs`")
        time.sleep(1)


def remove(engine: Any, stack: str, volumes: bool, timeout: float = 120) -> list[str]:
    """`docker stack rm`, then waits until its containers and networks are gone, then removes its secrets,
    configs and (with `volumes`) its volumes. What was removed, for the report."""
    gone = []
    if services(engine, stack) or engine.networks.list(filters={"label": f"{STACK_LABEL}={stack}"}):
        subprocess.run([docker_cli(), "stack", "rm", stack], capture_output=True, text=True)
        gone.append(f"stack {stack}")  # a failure (a network already going away) is judged by what is left below
    deadline = time.monotonic() + timeout
    label = {"label": f"{STACK_LABEL}={stack}"}
    while engine.containers.list(all=True, filters=label, ignore_removed=True) or engine.networks.list(filters=label):
        if time.monotonic() > deadline:
            raise SwarmError(
                f"the stack's containers or networks are still there after {timeout:.0f} s; run "
                f"`tooldock swarm down` again"
            )
        time.sleep(1)
    for item in [
        *engine.secrets.list(filters={"label": f"{OWN_LABEL}={stack}"}),
        *engine.configs.list(filters={"label": f"{OWN_LABEL}={stack}"}),
    ]:
        item.remove()
        gone.append(item.name)
    if volumes:
        for volume in engine.volumes.list(filters=label):
            volume.remove(force=True)
            gone.append(f"volume {volume.name}")
    return gone
