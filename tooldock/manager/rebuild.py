"""`reload_core` on the docker backend: every namespace folder whose image changed is rebuilt with the
daemonless builder (its layer cache makes an unchanged folder a no-op and a one-file edit an app-layer
rebuild), loaded into the engine and deployed as a new container generation. The gateway, following Docker
events, hot-swaps to the new generation once its worker answers, and drains the old one: no call is dropped.

"Changed" is decided by the image itself: builds are reproducible, so a folder whose image id equals the one
its newest running container runs has nothing new. A namespace whose build or start fails keeps its old
container serving; the reason is reported under `build_failed`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from tooldock.builder.build import Builder, BuildOptions
from tooldock.builder.daemon import engine
from tooldock.builder.daemon import load as load_image
from tooldock.errors import BuilderError
from tooldock.manager.workspace import Workspace
from tooldock.runtime.backends.deploy import deploy_image
from tooldock.runtime.backends.deploy import ps as list_workers
from tooldock.runtime.backends.deploy import stop as stop_workers
from tooldock.runtime.settings import Settings


def _say(message: str) -> None:
    print(f"tooldock manager: {message}", file=sys.stderr, flush=True)


class DockerRebuild:
    def __init__(self, workspace: Workspace, settings: Settings, cache: Path, base: str | None = None) -> None:
        self.workspace, self.settings = workspace, settings
        self.builder = Builder(BuildOptions(output=settings.state_dir / "manager-oci", cache=cache, base=base), _say)

    async def __call__(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync)

    async def install(self, folder: Path) -> None:
        """`install_requirements` on docker: lock and install into the image's dependency layer (cached)."""
        await asyncio.to_thread(self.builder.prepare, folder)

    async def remove(self, namespace: str) -> list[str]:
        """`delete_namespace` on docker: its worker containers go too."""
        return await asyncio.to_thread(lambda: stop_workers(engine(), namespace, self.settings.sockets))

    def sync(self) -> dict[str, Any]:
        client = engine()
        running: dict[str, str | None] = {}
        for row in list_workers(client):  # sorted by generation: the newest wins
            if row["status"] == "running":
                running[row["namespace"]] = row["image"]
        built: dict[str, str] = {}
        failed: dict[str, str] = {}
        for name in self.workspace.namespaces():
            folder = self.workspace.root / name
            if not any(p.suffix == ".py" and not p.name.startswith(("_", ".")) for p in folder.iterdir()):
                continue  # an empty namespace has no image yet
            try:
                result = self.builder.build(folder)
                if running.get(name) == result.image.config_digest:
                    continue
                _say(f"{name}: new image {result.image.manifest_digest[:19]}; deploying")
                ref = load_image(self.builder.store, result.image, result.repository, result.ref)[1]
                deploy_image(client, ref, self.settings.sockets, drain=self.settings.drain_timeout)
                built[name] = result.image.manifest_digest
            except BuilderError as exc:
                failed[name] = f"{exc}; the previous version keeps serving"
        return {"images_built": built, "build_failed": failed}
