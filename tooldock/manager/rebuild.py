"""`reload_core` on the docker backend: every namespace folder whose image changed is rebuilt with the
daemonless builder (its layer cache makes an unchanged folder a no-op and a one-file edit an app-layer
rebuild), loaded into the engine and deployed as a new container generation. The gateway, following Docker
events, hot-swaps to the new generation once its worker answers, and drains the old one: no call is dropped.

"Changed" is decided by the image itself: builds are reproducible, so a folder whose image id equals the one
its newest container runs has nothing new (running, or stopped by `idle_timeout`: a sleeping namespace is not
woken up and redeployed by a reload that changed nothing). A namespace whose build or start fails keeps its
old container serving; the reason is reported under `build_failed`, and the other namespaces go on. The
containers of a namespace `delete_namespace` deleted are removed (`containers_removed`); which namespaces
those are is kept in the state directory until then, for a manager restarted in between.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from tooldock.atomic import atomic_write
from tooldock.builder.build import Builder, BuildOptions
from tooldock.builder.daemon import DaemonError, engine
from tooldock.builder.daemon import load as load_image
from tooldock.errors import BuilderError
from tooldock.manager.workspace import Workspace
from tooldock.runtime.backends.containers import newest_per_namespace, worker_containers
from tooldock.runtime.backends.deploy import deploy_image
from tooldock.runtime.backends.deploy import stop as stop_workers
from tooldock.runtime.registry import KEEPS_SERVING
from tooldock.runtime.settings import Settings


def _say(message: str) -> None:
    print(f"tooldock manager: {message}", file=sys.stderr, flush=True)


def deployed_images(client: Any) -> dict[str, str]:
    """Per namespace, the image id its newest container runs (whatever its state: a container stopped by
    `idle_timeout` still is the deployed version). Containers removed while this lists them (the gateway
    retiring an old generation, a failed start being cleaned up) are skipped, not an error."""
    live = [c for c in worker_containers(client) if c.status not in ("removing", "dead") and c.attrs.get("Image")]
    return {namespace: str(c.attrs["Image"]) for namespace, c in newest_per_namespace(live).items()}


def wait_removed(client: Any, names: list[str], timeout: float = 15.0) -> None:
    """`deploy_image` returns once the old generation has stopped; the gateway may still be removing it (a
    second remove gets a 409 and returns at once). The gateway's rescan that `reload_core` asks for next lists
    the containers, and a container that disappears while it lists them fails that rescan: wait until the
    replaced ones are gone."""
    from docker.errors import DockerException, NotFound

    deadline = time.monotonic() + timeout
    for name in names:
        while time.monotonic() < deadline:
            try:
                client.containers.get(name)
            except NotFound:
                break
            except DockerException:
                return  # the deploy itself succeeded; the rescan reports an engine problem if there is one
            time.sleep(0.05)


class DockerRebuild:
    def __init__(self, workspace: Workspace, settings: Settings, cache: Path, base: str | None = None) -> None:
        self.workspace, self.settings = workspace, settings
        # delete_namespace's namespaces: their containers go at the next reload. Kept on disk, so a manager
        # restarted in between still removes them.
        self.pending = settings.state_dir / "manager-deleted.json"
        self.deleted: set[str] = self._load_deleted()
        self.builder = Builder(BuildOptions(output=settings.state_dir / "manager-oci", cache=cache, base=base), _say)

    def _load_deleted(self) -> set[str]:
        try:
            saved = json.loads(self.pending.read_text())
        except FileNotFoundError:
            return set()
        except (OSError, ValueError) as exc:
            _say(f"{self.pending} is unreadable ({exc}); deleted namespaces' containers stay (tooldock stop NS)")
            return set()
        if not isinstance(saved, dict) or saved.get("tools_dir") != str(self.workspace.root):
            return set()  # another tools directory's manager
        names = saved.get("deleted")
        return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()

    def _save_deleted(self) -> None:
        body = {"tools_dir": str(self.workspace.root), "deleted": sorted(self.deleted)}
        try:
            self.pending.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.pending, json.dumps(body).encode(), 0o600)
        except OSError as exc:  # still in memory: this manager removes them at its next reload
            _say(f"cannot record the deleted namespaces in {self.pending}: {exc}")

    async def __call__(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync)

    async def install(self, folder: Path) -> None:
        """`install_requirements` on docker: lock and install into the image's dependency layer (cached)."""
        await asyncio.to_thread(self.builder.prepare, folder)

    def forget(self, namespace: str) -> None:
        """`delete_namespace` on docker: its worker containers are removed by the next `reload_core`, when the
        namespace disappears from the gateway (seed 000), not at once. Only these: a container deployed by other
        means, with no folder here, is never removed by a reload."""
        self.deleted.add(namespace)
        self._save_deleted()

    def _remove_deleted(self, client: Any, failed: dict[str, str]) -> dict[str, list[str]]:
        from docker.errors import DockerException

        removed: dict[str, list[str]] = {}
        before = set(self.deleted)
        for name in sorted(self.deleted):
            if (self.workspace.root / name).is_dir():  # made again since: built and deployed as any other
                self.deleted.discard(name)
                continue
            try:
                if worker_containers(client, name):  # none: deleted before any reload deployed it
                    removed[name] = stop_workers(client, name, self.settings.sockets)
                self.deleted.discard(name)
            except DockerException as exc:  # tried again at the next reload
                failed[name] = f"deleted, but its containers could not be removed: {exc}"
        if self.deleted != before:
            self._save_deleted()
        return removed

    def sync(self) -> dict[str, Any]:
        from docker.errors import DockerException

        client = engine()
        try:
            deployed = deployed_images(client)
        except DockerException as exc:
            raise DaemonError(f"cannot list the worker containers: {exc}") from None
        built: dict[str, str] = {}
        failed: dict[str, str] = {}
        removed = self._remove_deleted(client, failed)
        for name in self.workspace.namespaces():
            folder = self.workspace.root / name
            try:
                if not any(p.suffix == ".py" and not p.name.startswith(("_", ".")) for p in folder.iterdir()):
                    continue  # an empty namespace has no image yet
                result = self.builder.build(folder)
                if deployed.get(name) == result.image.config_digest:
                    continue
                _say(f"{name}: new image {result.image.manifest_digest[:19]}; deploying")
                ref = load_image(self.builder.store, result.image, result.repository, result.ref)[1]
                outcome = deploy_image(client, ref, self.settings.sockets, drain=self.settings.drain_timeout)
                wait_removed(client, outcome["replaced"])
                built[name] = result.image.manifest_digest
            except (BuilderError, DockerException, OSError) as exc:
                if isinstance(exc, OSError) and not folder.is_dir():
                    continue  # deleted while this reload ran
                message = str(exc).strip() or type(exc).__name__
                if KEEPS_SERVING not in message:
                    message = f"{message}; {KEEPS_SERVING}"
                failed[name] = message
        return {"images_built": built, "build_failed": failed, "containers_removed": removed}
