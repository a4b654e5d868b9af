"""`tooldock build --manager`: the manager's image, for `tooldock compose`. The gateway image's three layers
(stored once for both), then one of its own:

- `/usr/local/bin/tooldock`, the command line, so `docker compose run --rm manager tooldock secrets set ...`
  works as on a host;
- a seed at /opt/tooldock/seed: the example namespaces (with their locks), and the build-cache entries that
  building them needs (the framework's lock and installed tree, the examples' dependency trees). The manager
  copies the examples into an empty tools directory on its first start and the cache entries into its build
  cache, so it builds and deploys them with no package index to reach.

It runs `tooldock manager /var/lib/tooldock/tools --backend docker` on port 8001 as uid 65532 and builds
worker images on the base it was built on, which `--load` puts into the engine next to it
(`TOOLDOCK_BASE_IMAGE=tooldock/base:sha256-<hex>`): nothing is pulled.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from tooldock.builder.build import Builder, BuildResult, entries_key
from tooldock.builder.daemon import digest_tag
from tooldock.builder.gateway import STATE_DIR, gateway_layers
from tooldock.builder.lock import Target, framework_lock_path
from tooldock.builder.tarball import Entry, entries_from_dir

NAME = "tooldock-manager"
BASE_REPOSITORY = "tooldock/base"
SEED_DIR = "/opt/tooldock/seed"
PORT = 8001


def base_reference(digest: str) -> str:
    """The engine's name for the base a manager image builds on (loaded with it by `--load`)."""
    return f"{BASE_REPOSITORY}:{digest_tag(digest)}"


def _launcher(python_bin: str) -> Entry:
    script = f"#!{python_bin} -s\nfrom tooldock.cli import main\n\nmain()\n"
    return Entry("/usr/local/bin/tooldock", script.encode(), mode=0o755)


def _seed_entries(builder: Builder, examples: Path | None) -> list[Entry]:
    """The examples, prepared here (locked, installed, schemas extracted), and what the cache holds for them."""
    _, info = builder.base()
    cache = builder.options.cache
    entries = [Entry(d, is_dir=True, mode=0o755) for d in ("/opt/tooldock", SEED_DIR, f"{SEED_DIR}/examples")]
    entries += [Entry(f"{SEED_DIR}/cache{d}", is_dir=True, mode=0o755) for d in ("", "/locks", "/trees")]
    lock = framework_lock_path(cache, Target(info.python, info.platform))
    trees: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="tooldock-seed-") as tmp:
        folders = sorted(p for p in examples.iterdir() if p.is_dir()) if examples is not None else []
        for folder in (f for f in folders if not f.name.startswith((".", "_"))):
            copy = Path(tmp) / folder.name
            shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__", ".*"))
            prepared = builder.prepare(copy)  # writes requirements.lock into the copy
            trees[prepared.fw_tree.name] = prepared.fw_tree
            trees[prepared.deps_tree.name] = prepared.deps_tree
            entries.append(Entry(f"{SEED_DIR}/examples/{folder.name}", is_dir=True, mode=0o755))
            # read now: the copies go away with the temporary directory
            found = entries_from_dir(copy, f"{SEED_DIR}/examples/{folder.name}")
            entries += [Entry(e.path, e.content(), mode=e.mode) if e.source is not None else e for e in found]
        if lock.is_file():
            entries.append(Entry(f"{SEED_DIR}/cache/locks/{lock.name}", lock.read_bytes()))
        for name, path in sorted(trees.items()):
            entries.append(Entry(f"{SEED_DIR}/cache/trees/{name}", is_dir=True, mode=0o755))
            entries += entries_from_dir(path, f"{SEED_DIR}/cache/trees/{name}", bytecode=True)
    return entries


def build_manager(builder: Builder, examples: Path | None) -> BuildResult:
    started = time.perf_counter()
    shared = gateway_layers(builder)
    entries = [_launcher(shared.info.python_bin), *_seed_entries(builder, examples)]
    layer, hit = builder.store.layer(entries_key("manager-seed", entries), lambda: entries)
    runtime = shared.runtime(
        NAME,
        "io.tooldock.manager",
        [
            f"TOOLDOCK_STATE_DIR={STATE_DIR}",
            f"UV_CACHE_DIR={STATE_DIR}/uv-cache",
            f"TOOLDOCK_CACHE_DIR={STATE_DIR}/cache",
            f"TOOLDOCK_BASE_IMAGE={base_reference(shared.base.manifest_digest)}",
            f"TOOLDOCK_SEED_DIR={SEED_DIR}",
        ],
        {
            "Cmd": ["tooldock", "manager", f"{STATE_DIR}/tools", "--backend", "docker", "--host", "0.0.0.0"],
            "ExposedPorts": {f"{PORT}/tcp": {}},
        },
    )
    shared.timings["total"] = time.perf_counter() - started
    return shared.result(builder, NAME, runtime, [("manager seed and command line", layer, hit)])
