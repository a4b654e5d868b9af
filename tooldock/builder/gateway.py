"""`tooldock build --gateway`: an image of the gateway itself, on the same base, built the same way.

Layers: the base's, the gateway's locked dependencies (ToolDock's own requirements, resolved as of the
framework date), and the `tooldock` package. It runs `tooldock serve /tools --host 0.0.0.0` as uid 65532;
mount the tools directory at /tools and a writable directory at /var/lib/tooldock (worker environments).
"""

from __future__ import annotations

import hashlib
import time
from importlib import metadata
from pathlib import Path

import tooldock
from tooldock.builder.blobs import cache_key
from tooldock.builder.build import Builder, BuildResult, entries_key
from tooldock.builder.imageconfig import USER, image_config
from tooldock.builder.install import filler, tree
from tooldock.builder.lock import Target, dated_lock
from tooldock.builder.oci import assemble, write_layout
from tooldock.builder.schema import interpreter_for
from tooldock.builder.tarball import Entry, entries_from_dir, iso_time, source_date_epoch

PACKAGES_DIR, SOURCE_DIR = "/opt/tooldock/gateway/packages", "/opt/tooldock/gateway/src"
NAME = "tooldock-gateway"


def requirements() -> str:
    """ToolDock's own runtime requirements (no extras), from its installed metadata."""
    wanted = [r for r in (metadata.requires("tooldock") or []) if "extra ==" not in r]
    return "\n".join(sorted(wanted)) + "\n"


def _source_entries() -> list[Entry]:
    package = Path(tooldock.__file__).resolve().parent
    return [
        e
        for e in entries_from_dir(package, f"{SOURCE_DIR}/tooldock")
        if not e.path.endswith((".sock",)) and "/__pycache__" not in e.path
    ]


def build_gateway(builder: Builder) -> BuildResult:
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
    created = iso_time(source_date_epoch())
    base_config = base.config_json
    inner = base_config.get("config") or {}
    runtime = {
        "User": USER,
        "WorkingDir": "/",
        "Env": [
            *(e for e in inner.get("Env", []) if not e.startswith("PYTHONPATH=")),
            f"PYTHONPATH={SOURCE_DIR}:{PACKAGES_DIR}",
            "PYTHONDONTWRITEBYTECODE=1",
            "PYTHONUNBUFFERED=1",
            "TOOLDOCK_STATE_DIR=/var/lib/tooldock",
            "UV_CACHE_DIR=/var/lib/tooldock/uv-cache",
            "HOME=/home/nonroot",
        ],
        "Entrypoint": [info.python_bin, "-s", "-m", "tooldock.cli"],
        "Cmd": ["serve", "/tools", "--host", "0.0.0.0"],
        "ExposedPorts": {"8000/tcp": {}},
        "Volumes": {"/tools": {}, "/var/lib/tooldock": {}},
        "Labels": {
            **(inner.get("Labels") or {}),
            "io.tooldock.gateway": tooldock.__version__,
            "org.opencontainers.image.title": NAME,
            "org.opencontainers.image.version": tooldock.__version__,
            "org.opencontainers.image.created": created,
        },
    }
    added = [
        ("tooldock build --gateway: dependencies", deps_layer.diff_id),
        ("tooldock build --gateway: tooldock", src_layer.diff_id),
    ]
    config = image_config(base_config, created, runtime, added)
    image = assemble(
        builder.store,
        config,
        [*base.layers, deps_layer, src_layer],
        {"org.opencontainers.image.created": created, "org.opencontainers.image.title": NAME},
    )
    layout = builder.options.output / NAME
    write_layout(layout, builder.store, image, tooldock.__version__)
    timings["total"] = time.perf_counter() - started
    return BuildResult(
        NAME,
        image,
        tooldock.__version__,
        layout,
        [],
        hashlib.sha256(lock.encode()).hexdigest(),
        [{"name": "base", "digest": layer.digest, "size": layer.size, "cached": True} for layer in base.layers]
        + [
            {"name": "gateway-deps", "digest": deps_layer.digest, "size": deps_layer.size, "cached": deps_hit},
            {"name": "gateway", "digest": src_layer.digest, "size": src_layer.size, "cached": src_hit},
        ],
        timings,
        repository="tooldock/gateway",
    )
