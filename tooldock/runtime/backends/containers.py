"""Conventions shared by `tooldock deploy` and the docker backend: labels, names, socket directories, and
the hardened `docker run` settings of a worker container."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path
from typing import Any

from tooldock.errors import DeployError
from tooldock.namespace.config import ConfigError, parse_config
from tooldock.namespace.models import NamespaceConfig
from tooldock.worker.protocol import PROTOCOL_VERSION

LABEL_NAMESPACE = "io.tooldock.namespace"
LABEL_GENERATION = "io.tooldock.generation"
LABEL_MANAGED = "io.tooldock.managed"  # started by `tooldock deploy`: the gateway may stop and remove it
# A run of `tooldock test --image` labels its containers with a scope of its own and tells its gateway
# (TOOLDOCK_WORKER_SCOPE, internal): only that gateway sees them, and it sees no others.
LABEL_SCOPE, SCOPE_ENV = "io.tooldock.scope", "TOOLDOCK_WORKER_SCOPE"
SOCKET_MOUNT = "/run/tooldock"
WORKER_UID = 65532
DEFAULT_MEMORY, DEFAULT_CPUS, DEFAULT_PIDS = "256m", 1.0, 256


def container_name(namespace: str, generation: int) -> str:
    return f"tooldock-{namespace}-{generation}"


def generation(container: Any) -> int:
    try:
        return int(container.labels.get(LABEL_GENERATION, "0"))
    except ValueError:
        return 0


def worker_containers(client: Any, namespace: str | None = None) -> list[Any]:
    """Every ToolDock worker container (of one namespace), in any state; ones removed while listing are skipped.
    Only those of this process's scope: none (the containers `tooldock deploy` starts), or a test run's."""
    label = f"{LABEL_NAMESPACE}={namespace}" if namespace else LABEL_NAMESPACE
    scope = os.environ.get(SCOPE_ENV, "")
    found = client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
    return [c for c in found if (c.labels or {}).get(LABEL_SCOPE, "") == scope]


def _age(container: Any) -> tuple[int, str]:
    return generation(container), container.attrs.get("Created", "")


def newest_per_namespace(containers: list[Any]) -> dict[str, Any]:
    """The newest generation's container of each namespace (ties: the one created last)."""
    newest: dict[str, Any] = {}
    for c in containers:
        ns = c.labels.get(LABEL_NAMESPACE, "")
        if ns and (
            ns not in newest
            or (generation(c), c.attrs.get("Created", ""))
            > (generation(newest[ns]), newest[ns].attrs.get("Created", ""))
        ):
            newest[ns] = c
    return newest


def image_contract(labels: dict[str, str] | None, where: str) -> tuple[str, NamespaceConfig, list[dict[str, Any]]]:
    """Namespace, config and tools from an image's labels; a clear error for an image ToolDock did not build."""
    labels = labels or {}
    if LABEL_NAMESPACE not in labels or "io.tooldock.protocol" not in labels:
        raise DeployError(
            f"{where} has no ToolDock labels (io.tooldock.namespace, io.tooldock.protocol): "
            "build it with `tooldock build --load`, or deploy the namespace folder"
        )
    if labels["io.tooldock.protocol"] != str(PROTOCOL_VERSION):
        raise DeployError(
            f"{where} was built for worker protocol {labels['io.tooldock.protocol']}, and this ToolDock "
            f"speaks {PROTOCOL_VERSION}: rebuild it with this version (`tooldock build --load`), or deploy the folder"
        )
    try:
        config = parse_config(json.loads(labels.get("io.tooldock.config") or "{}"))
        tools = json.loads(labels.get("io.tooldock.tools") or "[]")
    except (ConfigError, ValueError, RecursionError) as exc:
        raise DeployError(f"{where} has unreadable ToolDock labels: {exc}") from None
    return labels[LABEL_NAMESPACE], config, tools


def image_surface(labels: dict[str, str] | None) -> dict[str, list[dict[str, Any]]]:
    """The resources, resource templates and prompts an image's `io.tooldock.surface` label lists (none for
    images built before the label, or with none of them): listed until its worker connects."""
    try:
        surface = json.loads((labels or {}).get("io.tooldock.surface") or "{}")
    except (ValueError, RecursionError):
        return {}
    if not isinstance(surface, dict):
        return {}
    return {
        k: [i for i in surface.get(k) or [] if isinstance(i, dict)]
        for k in ("resources", "resourceTemplates", "prompts")
    }


def socket_dir_for(root: Path, name: str) -> Path:
    """The host directory mounted at /run/tooldock in one container, writable by the worker's user."""
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, WORKER_UID, WORKER_UID)
        path.chmod(0o750)
        root.chmod(0o711)  # traversable (not listable) by uid 65532: a containerised gateway runs as it
    else:  # we cannot give it to uid 65532; the directory above stays private to this user
        root.chmod(0o700)
        path.chmod(0o777)
    return path


def remove_socket_dir(root: Path, name: str) -> None:
    shutil.rmtree(root / name, ignore_errors=True)


def run_settings(config: NamespaceConfig, sockets: Path, name: str, gen: int, env: dict[str, str]) -> dict[str, Any]:
    """docker-py `containers.run` keyword arguments: non-root, read-only, no capabilities, no network."""
    limits = config.limits
    return {
        "name": name,
        "detach": True,
        "user": f"{WORKER_UID}:{WORKER_UID}",
        "read_only": True,
        "tmpfs": {"/tmp": "rw,nosuid,nodev,noexec,size=64m"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "mem_limit": limits.memory or DEFAULT_MEMORY,
        "nano_cpus": int((limits.cpus or DEFAULT_CPUS) * 1e9),
        "pids_limit": DEFAULT_PIDS,
        "network_mode": "none" if config.network == "none" else "bridge",
        "volumes": {str(sockets): {"bind": SOCKET_MOUNT, "mode": "rw"}},
        "labels": {LABEL_GENERATION: str(gen), LABEL_MANAGED: "true"},
        "environment": {**env, **secrets_via_socket(config)},
    }


def secrets_via_socket(config: NamespaceConfig) -> dict[str, str]:
    """The environment that makes a worker wait for its secret values on its socket (from the gateway)
    before importing its tools: names only, so `docker inspect` never shows a value."""
    if not config.secrets:
        return {}
    return {"TOOLDOCK_SECRETS_VIA": "socket", "TOOLDOCK_SECRET_NAMES": ",".join(config.secrets)}


_own_mounts: list[tuple[Path, Path]] | None = None


def own_mounts(client: Any) -> list[tuple[Path, Path]]:
    """The mounts of the container this process runs in (a gateway or manager started by `tooldock compose`),
    as (its path here, the engine's path), longest first. A socket directory handed to a worker container must
    be named as the engine knows it (under a named volume's mount point on the host), and a worker's mount read
    back as this process sees it. Outside a container, or when the engine does not know this one: none."""
    global _own_mounts
    if _own_mounts is None:
        found: list[tuple[Path, Path]] = []
        if Path("/.dockerenv").exists():
            try:
                me = client.containers.get(socket.gethostname())
                mounts = me.attrs.get("Mounts") or []
                found = [(Path(m["Destination"]), Path(m["Source"])) for m in mounts if m.get("Source")]
            except Exception:  # docker-py raises several types; the paths then are the same on both sides
                found = []
        _own_mounts = sorted(found, key=lambda pair: len(str(pair[0])), reverse=True)
    return _own_mounts


def engine_path(client: Any, local: Path) -> Path:
    """`local` (a path in this process's file system) as the Docker engine names it."""
    for here, there in own_mounts(client):
        if local == here or here in local.parents:
            return there / local.relative_to(here)
    return local


def local_path(client: Any, engine: Path) -> Path:
    """A path the Docker engine names (a worker's mount source) as this process sees it."""
    for here, there in own_mounts(client):
        if engine == there or there in engine.parents:
            return here / engine.relative_to(there)
    return engine


def mounted_socket_dir(container: Any) -> Path | None:
    for mount in container.attrs.get("Mounts") or []:
        if mount.get("Destination") == SOCKET_MOUNT and mount.get("Source"):
            return Path(mount["Source"])
    return None
