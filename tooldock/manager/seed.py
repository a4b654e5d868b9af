"""The manager's start in its container (`tooldock compose`, `TOOLDOCK_SEED_DIR`): what its image brings.

The manager image (`tooldock build --manager`) holds a seed: example namespaces, and build-cache entries
(the framework's lock and installed tree, the examples' dependency trees). On start, before serving:

- cache entries the build cache lacks are copied in (never over an entry it has: the cache is keyed by
  content, so an entry of the same name is the same);
- on the first start only (a marker in the state directory), each example is copied into the tools
  directory unless a folder of that name is there: a person who deletes them does not get them back;
- the secrets store is created, encrypted to the age identity mounted into the container, when there is
  none, so `tooldock secrets set` works at once.

Then, once serving, one `reload_core` builds and deploys every namespace of the tools directory (an unchanged
one is a no-op: builds are reproducible), so the examples answer through the gateway after a first start.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

MARKER = "manager-seeded"


def _say(message: str) -> None:
    print(f"tooldock manager: {message}", file=sys.stderr, flush=True)


def _copy_dir(source: Path, target: Path) -> None:
    """`source` as `target`, copied beside it first and renamed into place: never half there."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        shutil.copytree(source, staging, symlinks=True, dirs_exist_ok=True)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def seed_cache(seed: Path, cache: Path) -> list[str]:
    """Copy seed/cache/<kind>/<name> to cache/<kind>/<name> where missing; returns what was copied."""
    copied = []
    for kind in sorted(p for p in (seed / "cache").glob("*") if p.is_dir()):
        for entry in sorted(kind.iterdir()):
            target = cache / kind.name / entry.name
            if target.exists():
                continue
            if entry.is_dir():
                _copy_dir(entry, target)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(entry, target)
            copied.append(f"{kind.name}/{entry.name}")
    return copied


def seed_examples(seed: Path, tools_dir: Path, state_dir: Path) -> list[str]:
    """On the first start (no marker yet): the seed's examples into the tools directory, where missing."""
    marker = state_dir / MARKER
    tools_dir.mkdir(parents=True, exist_ok=True)
    if marker.exists():
        return []
    copied = []
    for example in sorted(p for p in (seed / "examples").glob("*") if p.is_dir()):
        if not (tools_dir / example.name).exists():
            _copy_dir(example, tools_dir / example.name)
            copied.append(example.name)
    state_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text("the example namespaces were copied into the tools directory once\n")
    return copied


def seed_secrets() -> None:
    """An empty store encrypted to the mounted age identity, when there is an identity and no store."""
    from tooldock.errors import SecretsError
    from tooldock.secrets.store import SecretStore

    store = SecretStore.from_env()
    if store.exists() or not store.key_path.is_file():
        return
    try:
        store.init()
        _say(f"secrets store created in {store.directory}, encrypted to {store.key_path}")
    except (SecretsError, OSError) as exc:
        _say(f"cannot create the secrets store in {store.directory}: {exc}")


def seed(seed_dir: Path, tools_dir: Path, cache: Path, state_dir: Path) -> None:
    if not seed_dir.is_dir():
        _say(f"no seed at {seed_dir} (TOOLDOCK_SEED_DIR): nothing copied")
        return
    cached = seed_cache(seed_dir, cache)
    if cached:
        _say(f"build cache seeded: {', '.join(cached)}")
    examples = seed_examples(seed_dir, tools_dir, state_dir)
    if examples:
        _say(f"first start: example namespaces {', '.join(examples)} copied into {tools_dir}")
    seed_secrets()


async def deploy_all(reloader: Any) -> None:
    """One `reload_core` at start: every namespace built and deployed (unchanged ones are no-ops)."""
    try:
        result = await reloader.reload_core()
    except Exception as exc:  # the gateway is not reachable yet: the next reload_core does it
        _say(f"start: the first reload failed ({exc}); call reload_core to deploy the namespaces")
        return
    built, failed = sorted(result.get("images_built") or {}), result.get("failed") or {}
    _say(f"start: deployed {', '.join(built) or 'nothing new'}" + (f"; failed: {failed}" if failed else ""))
