"""`tooldock build --gateway`: an image of the gateway itself, on the same base, built the same way.

Layers: the base's, the gateway's locked dependencies (ToolDock's own requirements, resolved as of the
framework date), and the `tooldock` package. It runs `tooldock serve /tools --host 0.0.0.0` as uid 65532;
mount the tools directory at /tools and a writable directory at /var/lib/tooldock (worker environments).
`GatewayLayers` is what the manager's image (`managerimage`) shares with it: the same three layers.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import tooldock
from tooldock.builder.base import NONROOT, BaseInfo
from tooldock.builder.blobs import cache_key
from tooldock.builder.build import Builder, BuildResult, entries_key
from tooldock.builder.imageconfig import USER, image_config
from tooldock.builder.install import filler, tree
from tooldock.builder.lock import Target, dated_lock
from tooldock.builder.materials import LockedLayer, Materials
from tooldock.builder.oci import Image, assemble, write_layout
from tooldock.builder.schema import interpreter_for
from tooldock.builder.tarball import Entry, Layer, entries_from_dir, iso_time, source_date_epoch

PACKAGES_DIR, SOURCE_DIR = "/opt/tooldock/gateway/packages", "/opt/tooldock/gateway/src"
NAME = "tooldock-gateway"
STATE_DIR = "/var/lib/tooldock"


def requirements() -> str:
    """ToolDock's own runtime requirements (no extras), from its installed metadata."""
    wanted = [r for r in (metadata.requires("tooldock") or []) if "extra ==" not in r]
    return "\n".join(sorted(wanted)) + "\n"


def _source_entries() -> list[Entry]:
    package = Path(tooldock.__file__).resolve().parent
    found = [
        e
        for e in entries_from_dir(package, f"{SOURCE_DIR}/tooldock")
        if not e.path.endswith((".sock",)) and "/__pycache__" not in e.path
    ]
    # The state directory belongs to the user the image runs as: a named volume mounted there on first use
    # takes this owner (`tooldock compose`: the one data volume), and so does an anonymous one.
    return [*found, Entry(STATE_DIR, is_dir=True, mode=0o755, owner=NONROOT)]


@dataclass
class GatewayLayers:
    """What the gateway and manager images share: the base, ToolDock's locked dependencies, its sources."""

    base: Image
    info: BaseInfo
    lock: str
    deps: Layer
    deps_hit: bool
    src: Layer
    src_hit: bool
    timings: dict[str, float]
    tree: Path | None = None  # the installed dependencies (their licences, for the SBOM)
    sources: tuple[Entry, ...] = ()

    def runtime(self, name: str, label: str, env: list[str], extra: dict[str, Any]) -> dict[str, Any]:
        """An image's container settings over the base's: ToolDock on its path, the `label` (io.tooldock.*)."""
        inner = self.base.config_json.get("config") or {}
        created = iso_time(source_date_epoch())
        return {
            "User": USER,
            "WorkingDir": "/",
            "Env": [
                *(e for e in inner.get("Env", []) if not e.startswith("PYTHONPATH=")),
                f"PYTHONPATH={SOURCE_DIR}:{PACKAGES_DIR}",
                "PYTHONDONTWRITEBYTECODE=1",
                "PYTHONUNBUFFERED=1",
                *env,
                "HOME=/home/nonroot",
            ],
            **extra,
            "Labels": {
                **(inner.get("Labels") or {}),
                label: tooldock.__version__,
                "org.opencontainers.image.title": name,
                "org.opencontainers.image.version": tooldock.__version__,
                "org.opencontainers.image.created": created,
            },
        }

    def result(
        self, builder: Builder, name: str, runtime: dict[str, Any], more: list[tuple[str, Layer, bool]]
    ) -> BuildResult:
        """The image (the shared layers, then `more`), written as OUTPUT/<name>."""
        created = iso_time(source_date_epoch())
        added = [
            ("tooldock build --gateway: dependencies", self.deps.diff_id),
            ("tooldock build --gateway: tooldock", self.src.diff_id),
            *((f"tooldock build: {what}", layer.diff_id) for what, layer, _ in more),
        ]
        config = image_config(self.base.config_json, created, runtime, added)
        image = assemble(
            builder.store,
            config,
            [*self.base.layers, self.deps, self.src, *(layer for _, layer, _ in more)],
            {"org.opencontainers.image.created": created, "org.opencontainers.image.title": name},
        )
        layout = builder.options.output / name
        materials = Materials(
            name,
            name.removeprefix("tooldock-"),
            tooldock.__version__,
            image,
            self.base,
            builder.options.base or "tooldock base",
            builder.debs() if builder.options.attach else None,
            self.info.python,
            self.info.platform,
            (LockedLayer("gateway", self.lock, self.tree),),
            self.sources,
        )
        attached = builder.attest(materials, self.timings)
        write_layout(layout, builder.store, image, tooldock.__version__, attached)
        return BuildResult(
            name,
            image,
            tooldock.__version__,
            layout,
            [],
            hashlib.sha256(self.lock.encode()).hexdigest(),
            [{"name": "base", "digest": layer.digest, "size": layer.size, "cached": True} for layer in self.base.layers]
            + [
                {"name": "gateway-deps", "digest": self.deps.digest, "size": self.deps.size, "cached": self.deps_hit},
                {"name": "gateway", "digest": self.src.digest, "size": self.src.size, "cached": self.src_hit},
            ]
            + [{"name": what, "digest": layer.digest, "size": layer.size, "cached": hit} for what, layer, hit in more],
            self.timings,
            repository=f"tooldock/{name.removeprefix('tooldock-')}",
            attached=attached,
        )


def gateway_layers(builder: Builder) -> GatewayLayers:
    timings: dict[str, float] = {}
    started = time.perf_counter()
    base, info = builder.base()
    target = Target(info.python, info.platform)
    cache = builder.options.cache
    lock = dated_lock(cache, "gateway", requirements(), target)
    timings["lock"] = time.perf_counter() - started
    python = interpreter_for(info.python)
    key = cache_key("gateway", lock, str(target))
    packages, _ = tree(cache, "gateway", key, filler(lock, target, python))
    timings["install"] = time.perf_counter() - started - timings["lock"]
    deps_layer, deps_hit = builder.store.layer(key, lambda: entries_from_dir(packages, PACKAGES_DIR))
    sources = _source_entries()
    src_layer, src_hit = builder.store.layer(entries_key("gateway-src", sources), lambda: sources)
    return GatewayLayers(base, info, lock, deps_layer, deps_hit, src_layer, src_hit, timings, packages, tuple(sources))


def build_gateway(builder: Builder) -> BuildResult:
    started = time.perf_counter()
    shared = gateway_layers(builder)
    runtime = shared.runtime(
        NAME,
        "io.tooldock.gateway",
        ["TOOLDOCK_STATE_DIR=/var/lib/tooldock", "UV_CACHE_DIR=/var/lib/tooldock/uv-cache"],
        {
            "Entrypoint": [shared.info.python_bin, "-s", "-m", "tooldock.cli"],
            "Cmd": ["serve", "/tools", "--host", "0.0.0.0"],
            # No declared volumes: each would be an anonymous volume at every `docker run` that mounts nothing
            # there (`deploy --gateway`, compose, which mount what they use), left behind by a plain `rm`.
            "ExposedPorts": {"8000/tcp": {}},
        },
    )
    shared.timings["total"] = time.perf_counter() - started
    return shared.result(builder, NAME, runtime, [])
