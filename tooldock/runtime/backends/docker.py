"""The `docker` backend: worker containers found through the Docker socket, by label.

Discovery lists containers labelled `io.tooldock.namespace` (the newest generation of each namespace
wins) and reads each one's tools from its image labels, so `tools/list` needs no round trip. Docker's
event stream (no polling) triggers a reload when a worker container starts or is removed. Workers are
reached on the unix socket in the directory mounted at /run/tooldock. A dead container is restarted
with backoff by the shared supervisor; a replaced one is drained, then stopped and removed if `tooldock
deploy` started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tooldock.errors import DependencyError, DeployError
from tooldock.namespace.models import NamespaceSource, Problem, ScanResult, ToolFile
from tooldock.namespace.scanner import scan_tools_dir
from tooldock.namespace.toolsfile import TOOLS_FILE
from tooldock.runtime.backends.containers import (
    LABEL_MANAGED,
    LABEL_NAMESPACE,
    image_contract,
    image_surface,
    local_path,
    mounted_socket_dir,
    newest_per_namespace,
    own_mounts,
    remove_socket_dir,
    worker_containers,
)
from tooldock.runtime.backends.supervisor import StartFailure, SupervisedWorker, WorkerGone
from tooldock.runtime.settings import Settings
from tooldock.runtime.workerclient import SecretEnv
from tooldock.worker.loglines import LineSplitter


class DockerWorker(SupervisedWorker):
    kind = "container"

    def __init__(
        self,
        backend: DockerBackend,
        source: NamespaceSource,
        container_id: str,
        sockets: Path,
        tools: list[dict[str, Any]],
        managed: bool,
        secrets: SecretEnv,
        surface: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        super().__init__(
            source.name, backend.settings, sockets / f"{source.name}.sock", source.config.idle_timeout, secrets
        )
        self.backend, self.source, self.container_id, self.managed = backend, source, container_id, managed
        # Restart the running container at the next launch, giving it this long to stop: it took other secret
        # values at its start (5 s), or it is stuck (2 s: a blocked event loop never handles SIGTERM).
        self._restart_grace: float | None = None
        self.tools = tools  # from the image labels: listable before the worker connects
        self.surface = dict(surface or {})  # resources, templates, prompts: likewise (io.tooldock.surface)
        self._exited = asyncio.Event()
        self._code: int | None = None
        self._launches = 0

    async def _prepare(self) -> None:
        if self.backend.read_only:
            return
        try:
            await asyncio.to_thread(self.backend.client.containers.get, self.container_id)
        except Exception as exc:
            raise DependencyError(f"container {self.container_id[:12]} is gone: {exc}") from None

    async def _launch(self) -> None:
        from docker.errors import NotFound

        loop = asyncio.get_running_loop()
        self._exited.clear()
        self._code = None
        self._launches += 1
        launch = self._launches  # what the threads below report counts only for this launch
        if self._superseded():
            # A newer worker took this container over (new secret values) and restarts it: this one must not
            # restart it too, nor connect to it without its secrets (a worker waiting for them would exit).
            raise WorkerGone(f"container {self.container_id[:12]} is served by a newer worker now")
        try:
            container = await asyncio.to_thread(self.backend.client.containers.get, self.container_id)
        except NotFound:
            raise WorkerGone(f"container {self.container_id[:12]} was removed") from None
        if container.status == "running" and self._restart_grace is not None and not self.backend.read_only:
            # New secret values: a restart makes it ask the gateway again. Stuck: a restart ends what runs on.
            grace, self._restart_grace = self._restart_grace, None
            self.socket_path.unlink(missing_ok=True)
            await asyncio.to_thread(container.restart, timeout=grace)
            container = await asyncio.to_thread(self.backend.client.containers.get, self.container_id)
        if container.status != "running":
            if self.backend.read_only:  # not ours to restart: reported, and rediscovered when it starts again
                raise WorkerGone(
                    f"container {container.name} is {container.status} (read-only discovery: not restarting it)"
                )
            self.socket_path.unlink(missing_ok=True)
            await asyncio.to_thread(container.start)
        self.pid = container.name

        def watch() -> None:
            try:
                result = container.wait()
                code = int(result.get("StatusCode", -1))
            except Exception:
                code = -1
            loop.call_soon_threadsafe(self._set_exited, code, launch)

        def logs() -> None:
            # Docker's frames are not lines: it splits a long line into 16 KiB frames, and one write of
            # several lines is one frame.
            splitter = LineSplitter()
            with contextlib.suppress(Exception):
                for raw in container.logs(stream=True, follow=True, tail=0):
                    if split := splitter.feed(raw):
                        loop.call_soon_threadsafe(self._launch_log, split, launch)
            if split := splitter.end():
                loop.call_soon_threadsafe(self._launch_log, split, launch)

        threading.Thread(target=watch, daemon=True, name=f"wait-{container.name}").start()
        threading.Thread(target=logs, daemon=True, name=f"logs-{container.name}").start()

    def _owner(self) -> bool:
        """Whether this is the newest supervisor of the container: only it gives secrets or restarts for them
        (the one it replaces keeps serving, with what the container has, until it is retired)."""
        return self.backend.secret_owners.get(self.container_id) is self

    def _superseded(self) -> bool:
        owner = self.backend.secret_owners.get(self.container_id)
        return owner is not None and owner is not self

    def _owns_socket(self) -> bool:
        # superseded: the newer worker of this container serves on the same socket path; removing it would
        # leave the container unreachable for the next gateway
        return not self._superseded()

    def _deliverable(self) -> SecretEnv | None:
        return self.secrets if self._owner() else None

    async def _wait_ready(self) -> None:
        await super()._wait_ready()
        assert self._conn is not None
        started_with = self._conn.handshake.get("secrets_token")
        if not self.source.config.secrets or started_with == self.secrets.token or not self._owner():
            return
        if started_with is None:  # deployed without TOOLDOCK_SECRETS_VIA=socket: it cannot take them
            self._log_line(
                f"container {self.pid} does not take secrets from the gateway: redeploy it with "
                "`tooldock deploy` of this ToolDock version"
            )
            return
        if self.backend.read_only:
            self._log_line(f"container {self.pid} runs with other secret values (read-only discovery: left as is)")
            return
        self._restart_grace = 5
        raise StartFailure(f"container {self.pid} runs with other secret values: restarting it")

    def _set_exited(self, code: int, launch: int) -> None:
        # A restart (new secret values, a stuck worker) ends the previous launch's wait with code 0 after the
        # next launch began: that exit is not this launch's (it was read as "exited before it was ready": one
        # more restart).
        if launch == self._launches:
            self._code = code
            self._exited.set()

    def _launch_log(self, split: list[tuple[bytes, int]], launch: int) -> None:
        if launch == self._launches:  # the previous launch's stream may still deliver a line or two
            self._output.lines(split)

    def _exit_code(self) -> int | None:
        return self._code

    async def _wait_exited(self) -> None:
        await self._exited.wait()

    async def _discard_stuck(self) -> None:
        if self.backend.read_only:  # not ours to restart: it serves on as it can
            self._log_line(f"container {self.pid} is stuck (read-only discovery: not restarting it)")
        else:
            self._restart_grace = 2  # restarted by the next _launch

    async def release(self) -> None:
        """The gateway is stopping: let go of the container and leave it running for the next gateway."""
        self._stopping = True
        self._stuck.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._disconnect()
        self.state = "stopped"

    async def _terminate(self) -> None:
        if not self._retiring or not self.managed or self.backend.read_only or not self._owner():
            # crashed: restarted in place by the next _launch; released: left running for the next gateway;
            # superseded on the same container (new secret values): the newer worker serves it now
            return
        with contextlib.suppress(Exception):
            container = await asyncio.to_thread(self.backend.client.containers.get, self.container_id)
            await asyncio.to_thread(container.remove, force=True)
        root = self.socket_path.parent.parent
        remove_socket_dir(root, self.socket_path.parent.name)


class DockerBackend:
    name = "docker"

    def __init__(self, settings: Settings, read_only: bool = False, tools_dir: Path | None = None) -> None:
        import docker

        self.settings, self.read_only = settings, read_only
        self.tools_dir = tools_dir  # its upstream folders (tools.toml) are served too: they need no container
        self.client = docker.from_env()
        self._found: dict[str, dict[str, Any]] = {}
        # Per container: the newest worker supervising it, the only one that hands it secrets (weak: a
        # retired worker goes away with its supervision).
        self.secret_owners: weakref.WeakValueDictionary[str, DockerWorker] = weakref.WeakValueDictionary()
        self._watcher: threading.Thread | None = None
        self._closing = threading.Event()

    def _discover(self) -> ScanResult:
        # A container removed while this lists them (an old generation retired) is skipped, instead of
        # failing the whole rescan with "No such container".
        containers = worker_containers(self.client)
        sources, problems, found = [], [], {}
        for ns, c in sorted(newest_per_namespace(containers).items()):
            try:
                _, config, tools = image_contract(c.labels, f"container {c.name}")
            except DeployError as exc:
                problems.append(Problem(c.name, str(exc), None, "invalid_container"))
                continue
            mounted = mounted_socket_dir(c)
            sockets = local_path(self.client, mounted) if mounted else None
            if sockets is None:
                problems.append(
                    Problem(
                        c.name,
                        "no host directory mounted at /run/tooldock; redeploy it with tooldock deploy",
                        None,
                        "invalid_container",
                    )
                )
                continue
            if own_mounts(self.client) and not sockets.is_dir():  # in a container: another one's, or gone
                problems.append(
                    Problem(
                        c.name,
                        f"its socket directory {mounted} is not in this gateway's mounts",
                        None,
                        "invalid_container",
                    )
                )
                continue
            sources.append(
                NamespaceSource(
                    name=ns,
                    path=Path("/app"),
                    files=(ToolFile(c.name, tuple(t["name"] for t in tools)),),
                    problems=(),
                    config=config,
                    requirements="",
                    fingerprint=c.id,
                )
            )
            found[ns] = {
                "id": c.id,
                "sockets": sockets,
                "tools": tools,
                "surface": image_surface(c.labels),
                "managed": c.labels.get(LABEL_MANAGED) == "true",
            }
        self._found = found
        if self.tools_dir is not None and self.tools_dir.is_dir():
            upstream = scan_tools_dir(self.tools_dir, upstream_only=True)
            problems += upstream.problems
            for source in upstream.namespaces:
                if source.name in found:
                    problems.append(
                        Problem(
                            f"{source.name}/{TOOLS_FILE}",
                            f"namespace {source.name!r} is both a worker container and an upstream folder: the "
                            "container is served; rename the folder",
                            None,
                            "duplicate_namespace",
                        )
                    )
                else:
                    sources.append(source)
        return ScanResult(tuple(sources), tuple(problems))

    async def discover(self) -> ScanResult:
        try:
            return await asyncio.to_thread(self._discover)
        except Exception as exc:  # the engine is down: keep what we have, say why
            raise OSError(f"cannot list worker containers: {exc}") from exc

    def create(self, source: NamespaceSource, secrets: SecretEnv) -> DockerWorker:
        found = self._found[source.name]
        worker = DockerWorker(
            self,
            source,
            found["id"],
            found["sockets"],
            list(found["tools"]),
            found["managed"],
            secrets,
            found["surface"],
        )
        self.secret_owners[found["id"]] = worker
        return worker

    def watch(self, on_change: Callable[[], None]) -> None:
        """Follow Docker's event stream in a thread; reconnect (and rescan) when the engine comes back."""
        loop = asyncio.get_running_loop()

        def follow() -> None:
            import time

            delay = 0.5
            while not self._closing.is_set():
                try:
                    events = self.client.events(
                        decode=True,
                        filters={"type": "container", "label": LABEL_NAMESPACE, "event": ["start", "destroy"]},
                    )
                    loop.call_soon_threadsafe(on_change)  # (re)connected: catch up on what we missed
                    delay = 0.5
                    for _ in events:
                        loop.call_soon_threadsafe(on_change)
                        if self._closing.is_set():
                            return
                except Exception as exc:
                    if self._closing.is_set():
                        return
                    print(f"tooldock: docker events: {exc}; retrying in {delay:g}s", file=sys.stderr, flush=True)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

        self._watcher = threading.Thread(target=follow, daemon=True, name="docker-events")
        self._watcher.start()

    async def close(self) -> None:
        self._closing.set()
        with contextlib.suppress(Exception):
            self.client.close()
