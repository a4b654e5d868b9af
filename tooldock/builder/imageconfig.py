"""What a worker image says about itself: environment, labels, entrypoint, user. One definition, used
by both the daemonless builder and the `docker build` route, so the two produce the same contract."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import tooldock
from tooldock.builder.base import BaseInfo
from tooldock.namespace.config import config_to_dict
from tooldock.namespace.models import NamespaceSource
from tooldock.worker.protocol import PROTOCOL_VERSION

FRAMEWORK_DIR, DEPS_DIR, APP_DIR = "/opt/tooldock/framework", "/opt/tooldock/deps", "/app"
USER = "65532:65532"


def environment(source: NamespaceSource, base_env: list[str]) -> list[tuple[str, str]]:
    pairs = [_pair(e) for e in base_env if "=" in e and not e.startswith("PYTHONPATH=")]
    pairs += [
        ("PYTHONPATH", f"{DEPS_DIR}:{FRAMEWORK_DIR}"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONUNBUFFERED", "1"),
        ("TOOLDOCK_NAMESPACE", source.name),
        ("TOOLDOCK_APP_DIR", APP_DIR),
    ]
    pairs += list(source.config.env)
    return pairs


def _pair(assignment: str) -> tuple[str, str]:
    key, _, value = assignment.partition("=")
    return key, value


def labels(
    source: NamespaceSource,
    tools: list[dict[str, Any]],
    lock: str,
    created: str,
    surface: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, str]:
    """`surface`: the namespace's resources, resource templates and prompts, so a gateway lists them before
    the worker container connects, as it lists the tools (no label when it has none)."""
    cfg = source.config
    result = {
        "io.tooldock.namespace": source.name,
        "io.tooldock.tools": json.dumps(tools, sort_keys=True, separators=(",", ":")),
        "io.tooldock.secrets": json.dumps(list(cfg.secrets)),
        "io.tooldock.config": json.dumps(config_to_dict(cfg), sort_keys=True, separators=(",", ":")),
        "io.tooldock.protocol": str(PROTOCOL_VERSION),
        "io.tooldock.network": cfg.network,
        "io.tooldock.lock-hash": hashlib.sha256(lock.encode()).hexdigest(),
        "io.tooldock.builder": f"tooldock {tooldock.__version__}",
        "org.opencontainers.image.title": source.name,
        "org.opencontainers.image.description": cfg.description,
        "org.opencontainers.image.version": cfg.version,
        "org.opencontainers.image.created": created,
    }
    if surface:
        result["io.tooldock.surface"] = json.dumps(surface, sort_keys=True, separators=(",", ":"))
    if cfg.author:
        result["org.opencontainers.image.authors"] = cfg.author
    return result


def entrypoint(info: BaseInfo) -> list[str]:
    return [info.python_bin, "-s", "-m", "tooldock.worker"]


def image_config(
    base: dict[str, Any], created: str, runtime: dict[str, Any], added: list[tuple[str, str]]
) -> dict[str, Any]:
    """An image's config on top of its base's: the base's platform, layers and history, then one layer per
    `added` pair (its history line, its diff_id); `runtime` is what a container runs with (User, Env,
    Entrypoint, Labels, ...). The keys' order is part of the config's digest: keep it."""
    return {
        "architecture": base.get("architecture", "amd64"),
        "os": base.get("os", "linux"),
        "created": created,
        "config": runtime,
        "rootfs": {
            "type": "layers",
            "diff_ids": [*(base.get("rootfs") or {}).get("diff_ids", []), *(diff_id for _, diff_id in added)],
        },
        "history": [*base.get("history", []), *({"created": created, "created_by": by} for by, _ in added)],
    }
