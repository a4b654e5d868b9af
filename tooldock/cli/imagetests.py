"""`tooldock test --image`: each namespace's own `tests/`, run with pytest inside the namespace's image, against
the namespace served from that image as the docker backend serves it. Made for CI: test exactly what ships.

For each namespace folder: the image is built by the daemonless builder (`tooldock build`'s, with its cache)
and loaded into the Docker engine (tagged by digest only: `tooldock/<ns>:sha256-<hex>`, so no version tag a
deploy uses is moved); its worker container is run with the hardened settings `tooldock deploy` uses, its
socket in a temporary directory. One gateway (`tooldock serve --backend docker` on a loopback port) serves
them. Every container of a run carries a scope label of its own (`io.tooldock.scope`): only the run's gateway
sees them, and it sees no other worker container (runtime/backends/containers.py), so a test run never
touches, nor is touched by, a gateway serving the same namespaces on the same engine.

pytest runs in a throwaway container of the same image: read-only, the image's non-root user, no
capabilities, no network but its own loopback. The gateway reaches it as a unix socket mounted into it
(the plugin forwards the gateway's loopback address to it: tooldock/testing.py), the namespace's `tests/`
is mounted read-only at /app/tests (it is not in the image), and pytest, its dependencies and ToolDock's
plugin are mounted read-only from ToolDock's own installation (the real directories: links to host paths
would not resolve there), so the image's Python must be able to import them. Containers, socket directories
and the gateway are removed on every way out, Ctrl-C and SIGTERM too.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from tooldock.builder.imageconfig import APP_DIR
from tooldock.runtime.backends.containers import LABEL_NAMESPACE, LABEL_SCOPE, SCOPE_ENV, WORKER_UID

LIB = "/opt/tooldock-test"  # where pytest and ToolDock's plugin are mounted in the tests' container
BRIDGE = "/run/tooldock-test"  # where the gateway's socket is
READY_TIMEOUT = 60.0  # seconds for a worker container to answer, then for the gateway to serve it


class Failed(Exception):
    """One namespace cannot be tested: the line says why."""


class Run:
    """What one `tooldock test --image` started, all removed by `close`."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.scope = f"test-{secrets.token_hex(6)}"
        self.root = Path(tempfile.mkdtemp(prefix="tdt-"))  # short: unix socket paths are limited
        self.gateway: Any = None
        self.bridge: socket.socket | None = None

    def labels(self) -> dict[str, str]:
        return {LABEL_SCOPE: self.scope}

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()
        if self.bridge is not None:
            self.bridge.close()
        with contextlib.suppress(Exception):
            mine = self.client.containers.list(all=True, filters={"label": f"{LABEL_SCOPE}={self.scope}"})
            for container in mine:
                with contextlib.suppress(Exception):
                    container.remove(force=True)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def _terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job cancelled) unwinds like Ctrl-C, so everything started is removed."""

    def raise_interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def build_and_load(builder: Any, folder: Path, console: Any) -> Any:
    """The namespace's image in the engine (loaded unless it is there already): the docker-py Image."""
    from tooldock.builder.daemon import digest_tag, engine, load
    from tooldock.errors import BuilderError

    try:
        with console.status(f"building {folder.name}"):
            result = builder.build(folder)
        tag = f"{result.repository}:{digest_tag(result.image.manifest_digest)}"
        client = engine()
        try:
            image = client.images.get(tag)
        except Exception:
            with console.status(f"loading {folder.name} into Docker"):
                load(builder.store, result.image, result.repository, digest_tag(result.image.manifest_digest))
            image = client.images.get(tag)
    except BuilderError as exc:
        raise Failed(f"its image did not build: {exc}") from None
    console.print(f"  {folder.name}: image {tag}")
    return image


def check_python(image: Any, packages: dict[str, Path]) -> str:
    """The image's interpreter, once it is clear it can import the pytest mounted from ToolDock's installation."""
    import importlib.metadata

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from tooldock.builder.base import LABEL_PYTHON, LABEL_PYTHON_BIN

    labels = image.labels or {}
    version, python = labels.get(LABEL_PYTHON, ""), labels.get(LABEL_PYTHON_BIN, "")
    if not version or not python:
        raise Failed(f"its image does not say which Python it has (label {LABEL_PYTHON})")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    try:
        older = tuple(map(int, version.split(".")[:2])) < sys.version_info[:2]
    except ValueError:
        raise Failed(f"its image's Python version {version!r} does not parse") from None
    if older:  # pytest needs more packages on older Pythons, which ToolDock's installation does not have
        raise Failed(
            f"its image has Python {version}, older than ToolDock's ({here}): pytest from ToolDock's installation "
            f"cannot run there; build it on a base with Python {here} or newer, or test it without --image"
        )
    for name in packages:
        if name.endswith(".dist-info"):
            dist = name.split("-")[0]
            with contextlib.suppress(importlib.metadata.PackageNotFoundError, InvalidSpecifier, KeyError):
                needs = importlib.metadata.metadata(dist)["Requires-Python"] or ""
                if needs and not SpecifierSet(needs).contains(version):
                    raise Failed(f"its image has Python {version}; {dist} (for the tests) needs Python {needs}")
    return python


def start_worker(run: Run, image: Any) -> str:
    """The namespace's worker container, as `tooldock deploy` runs it (hardened, its socket in the run's
    directory), once it answers on its socket: its namespace."""
    import os

    from docker.errors import DockerException

    from tooldock.errors import DeployError
    from tooldock.namespace.models import INLINE_REFS_ENV
    from tooldock.runtime.backends.containers import engine_path, image_contract, run_settings, socket_dir_for
    from tooldock.runtime.backends.deploy import _handshake

    try:
        namespace, config, _ = image_contract(image.labels, f"image {image.tags[0] if image.tags else image.id}")
    except DeployError as exc:
        raise Failed(str(exc)) from None
    name = f"tooldock-{run.scope}-{namespace}"
    sockets = socket_dir_for(run.root, name)
    asked = {INLINE_REFS_ENV: os.environ[INLINE_REFS_ENV]} if os.environ.get(INLINE_REFS_ENV) else {}
    settings = run_settings(config, engine_path(run.client, sockets), name, 1, {**asked, **dict(config.env)})
    settings["labels"].update(run.labels())
    try:
        container = run.client.containers.run(image.id, **settings)
    except DockerException as exc:
        raise Failed(f"docker could not start its worker container: {exc}") from None
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            _handshake(sockets / f"{namespace}.sock", 5)
            return namespace
        except (OSError, ValueError):
            container.reload()
            if container.status not in ("created", "running") or time.monotonic() > deadline:
                logs = container.logs(tail=20).decode(errors="replace").strip()
                raise Failed(f"its worker container did not become ready ({container.status}):\n{logs}") from None
            time.sleep(0.1)


def open_bridge(run: Run, port: int) -> Path:
    """A unix socket (in a directory of its own, to be mounted into the tests' container) forwarded to the
    gateway's loopback port."""
    from tooldock.testing import forward

    folder = run.root / "gateway"
    folder.mkdir()
    folder.chmod(0o755)
    path = folder / "gateway.sock"
    run.bridge = socket.socket(socket.AF_UNIX)
    run.bridge.bind(str(path))
    path.chmod(0o777)  # the image's user connects to it
    run.bridge.listen(64)
    forward(run.bridge, lambda: socket.create_connection(("127.0.0.1", port)))
    return folder


def wait_served(gateway: Any, namespace: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        state, why = gateway.state_of(namespace)
        if state == "ready":
            return
        if time.monotonic() > deadline or state in ("failed", "missing"):
            raise Failed(f"not served ({state}): {why}")
        time.sleep(0.2)


def run_pytest(
    run: Run, image: Any, python: str, folder: Path, bridge: Path, packages: dict[str, Path], extra: list[str]
) -> int:
    """pytest in a throwaway container of the namespace's image; its output to stdout; its exit code."""
    from docker.errors import DockerException

    config = image.attrs.get("Config") or {}
    user = config.get("User") or ""
    if user.split(":")[0] in ("", "0", "root"):
        user = f"{WORKER_UID}:{WORKER_UID}"
    image_path = next((e.partition("=")[2] for e in config.get("Env") or [] if e.startswith("PYTHONPATH=")), "")
    volumes = {
        str(folder / "tests"): {"bind": f"{APP_DIR}/tests", "mode": "ro"},
        str(bridge): {"bind": BRIDGE, "mode": "ro"},
        **{str(path): {"bind": f"{LIB}/{path.name}", "mode": "ro"} for path in packages.values()},
    }
    env = {
        "PYTHONPATH": ":".join(p for p in (LIB, APP_DIR, image_path) if p),
        "PYTHONDONTWRITEBYTECODE": "1",
        "TOOLDOCK_TEST_URL": run.gateway.url,
        "TOOLDOCK_TEST_TOKEN": run.gateway.token,
        "TOOLDOCK_TEST_NAMESPACE": folder.name,
        "TOOLDOCK_TEST_SOCKET": f"{BRIDGE}/gateway.sock",
        **({"PY_COLORS": "1"} if sys.stdout.isatty() else {}),
    }
    args = ["-m", "pytest", "tests", "-p", "tooldock.testing", "-p", "no:cacheprovider", "--rootdir", APP_DIR, *extra]
    try:
        container = run.client.containers.run(
            image.id,
            args,
            entrypoint=[python],
            name=f"tooldock-{run.scope}-{folder.name}-pytest",
            detach=True,
            user=user,
            working_dir=APP_DIR,
            read_only=True,
            tmpfs={"/tmp": "rw,nosuid,nodev,size=64m"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges:true"],
            network_mode="none",
            mem_limit="1g",
            pids_limit=256,
            volumes=volumes,
            environment=env,
            # not a worker: no gateway serves it (an empty namespace is skipped); the scope: removed with the run
            labels={LABEL_NAMESPACE: "", **run.labels()},
        )
    except DockerException as exc:
        raise Failed(f"docker could not start its tests' container: {exc}") from None
    try:
        sys.stdout.flush()
        for chunk in container.logs(stream=True, follow=True):
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
        return int(container.wait().get("StatusCode", 1))
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)


def run_in_images(folders: list[Path], extra: list[str]) -> list[str]:
    """Test each folder in its image; the names of those that failed (each with a line on stderr saying why)."""
    from rich.console import Console

    from tooldock.builder.build import Builder, BuildOptions
    from tooldock.builder.daemon import DaemonError, engine
    from tooldock.cli.common import cache_dir
    from tooldock.cli.runtests import Gateway, test_packages

    try:
        client = engine()
    except DaemonError as exc:
        raise click.ClickException(f"--image needs the Docker engine: {exc}") from None
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    packages = test_packages()
    failed: list[str] = []
    ready: dict[str, tuple[Any, str]] = {}
    run = Run(client)
    with _terminated_as_interrupt(), tempfile.TemporaryDirectory(prefix="tooldock-test-") as tmp:
        try:
            cache = cache_dir()
            cache.mkdir(parents=True, exist_ok=True)
            output = Path(tempfile.mkdtemp(prefix=".test-oci-", dir=cache))  # hard links from the cache
            builder = Builder(BuildOptions(output=output, cache=cache), say=lambda m: console.print(f"  {m}"))
            try:
                for folder in folders:
                    try:
                        image = build_and_load(builder, folder, console)
                        python = check_python(image, packages)
                        with console.status(f"starting {folder.name}'s worker container"):
                            if start_worker(run, image) != folder.name:
                                raise Failed("its image is of another namespace")
                        ready[folder.name] = (image, python)
                    except Failed as exc:
                        click.echo(f"{folder.name}: {exc}", err=True)
                        failed.append(folder.name)
            finally:
                shutil.rmtree(output, ignore_errors=True)
            if not ready:
                return failed
            empty = Path(tmp) / "tools"  # the docker backend serves containers; no folder
            empty.mkdir()
            run.gateway = Gateway(
                empty,
                Path(tmp) / "gateway.log",
                ("--backend", "docker"),
                {SCOPE_ENV: run.scope, "TOOLDOCK_SOCKET_DIR": str(run.root)},
            )
            run.gateway.wait()
            bridge = open_bridge(run, int(run.gateway.url.rsplit(":", 1)[1]))
            for folder in folders:
                if folder.name not in ready:
                    continue
                image, python = ready[folder.name]
                try:
                    wait_served(run.gateway, folder.name)
                    click.echo(f"{folder.name}: running its tests in its image {image.short_id}", err=True)
                    if run_pytest(run, image, python, folder, bridge, packages, extra) != 0:
                        failed.append(folder.name)
                except Failed as exc:
                    click.echo(f"{folder.name}: {exc}", err=True)
                    failed.append(folder.name)
        finally:
            run.close()
    return failed
