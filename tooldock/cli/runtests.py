"""`tooldock test`: each namespace's own `tests/`, run with pytest in that namespace's environment, against the
namespace served as ToolDock serves it.

One gateway (`tooldock serve` on a loopback port, a token of its own) serves the namespace folders given; for
each, pytest runs in the namespace's virtualenv (the one its worker runs in: its requirements and fastmcp),
with pytest itself and ToolDock's plugin (tooldock/testing.py: the `mcp_client` fixture) put on its
PYTHONPATH from ToolDock's own installation, so nothing is installed for the tests. The namespace folder is
on the PYTHONPATH too, so a test may import a tool file and call its functions directly. Files under
`tests/` are not tools and are not put in the namespace's image (namespace/scanner.py, builder/build.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from tooldock.cli.call import namespace_folder, tools_dir_of
from tooldock.cli.common import settings, writable_state_dir

# What pytest needs, linked from ToolDock's installation into a directory of their own (not the whole
# site-packages: that would put the gateway's packages in front of the namespace's).
TEST_MODULES = ("tooldock", "pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py")
READY = re.compile(r"tooldock: ready on (http://127\.0\.0\.1:\d+)")
START_TIMEOUT = 600.0  # seconds: the first start builds the namespaces' environments


def test_packages() -> dict[str, Path]:
    """ToolDock's and pytest's packages (with pytest's dependencies and their metadata) as installed here:
    name -> the real directory (or module file)."""
    found: dict[str, Path] = {}
    for name in TEST_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        locations = list(spec.submodule_search_locations or [])
        path = Path(locations[0]) if locations else Path(spec.origin or "")
        if path.exists():
            found[name] = path.resolve()
    for dist in ("pytest", "pluggy", "iniconfig", "packaging"):  # their metadata: pytest reads versions from it
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            where = getattr(importlib.metadata.distribution(dist), "_path", None)
            if isinstance(where, Path) and where.is_dir():
                found[where.name] = where.resolve()
    return found


def test_lib(state_dir: Path) -> Path:
    """A directory of links to ToolDock and pytest (with its dependencies), for the tests' PYTHONPATH."""
    found = test_packages()
    key = hashlib.sha256(repr(sorted(found.items())).encode()).hexdigest()[:12]
    lib = state_dir / "testlib" / key
    if not lib.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix=".testlib-", dir=lib.parent if lib.parent.is_dir() else None))
        for path in found.values():
            (tmp / path.name).symlink_to(path, target_is_directory=path.is_dir())  # a dist-info: its own name
        lib.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(tmp, lib)
        except OSError:  # another run made it first
            pass
    return lib


async def _environment(source: Any, envs_root: Path) -> Path:
    """The interpreter of the namespace's worker environment (made now if it is not yet), the same one
    `serve` runs its worker in; an upstream namespace's tests run in the base environment."""
    from tooldock.runtime.backends.environments import Environments

    envs = Environments(envs_root)
    if source.is_upstream:
        python, _ = await envs.ensure(source.name, None, "", None)
    else:
        requirements = source.path / "requirements.txt"
        python, _ = await envs.ensure(source.name, requirements, source.requirements, source.config.python)
    return python


class Gateway:
    """`tooldock serve` on a loopback port over a tools directory, for the tests' clients."""

    def __init__(
        self, tools_dir: Path, log: Path, args: tuple[str, ...] = (), more_env: dict[str, str] | None = None
    ) -> None:
        self.token = secrets.token_urlsafe(32)
        self.log = log
        env = {**os.environ, **(more_env or {}), "TOOLDOCK_BEARER_TOKEN": self.token}
        env.pop("TOOLDOCK_STATE_URL", None)  # one gateway of its own: no replicas' store
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tooldock.cli", "serve", str(tools_dir), "--port", "0", *args],
                stdout=subprocess.DEVNULL,
                stderr=out,
                env=env,
            )
        self.url = ""

    def wait(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if found := READY.search(text):
                self.url = found.group(1)
                return self.url
            if self.proc.poll() is not None:
                raise click.ClickException(f"the gateway for the tests did not start:\n{text[-3000:]}")
            time.sleep(0.1)
        raise click.ClickException(f"the gateway for the tests did not start in {START_TIMEOUT:.0f} s")

    def state_of(self, namespace: str) -> tuple[str, str]:
        """The namespace's state on the gateway and why, if it is not ready."""
        import httpx

        listing = httpx.get(f"{self.url}/namespaces", headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        for entry in listing.json().get("namespaces", []):
            if entry.get("name") == namespace:
                return str(entry.get("state")), str(entry.get("error") or entry.get("reason") or "")
        return "missing", "the gateway does not serve it (see `tooldock check`)"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _pytest(python: Path, folder: Path, lib: Path, gateway: Gateway, extra: list[str]) -> int:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(lib), str(folder)]),
        "PYTHONDONTWRITEBYTECODE": "1",  # nothing written into the namespace folder
        "TOOLDOCK_TEST_URL": gateway.url,
        "TOOLDOCK_TEST_TOKEN": gateway.token,
        "TOOLDOCK_TEST_NAMESPACE": folder.name,
    }
    args = [str(python), "-m", "pytest", "tests", "-p", "tooldock.testing", "-p", "no:cacheprovider"]
    args += ["--rootdir", str(folder), *extra]
    sys.stdout.flush()
    return subprocess.run(args, cwd=folder, env=env).returncode


@click.command("test")
@click.argument("namespace_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--pytest-args",
    default="",
    metavar="ARGS",
    help='More arguments for pytest, as one shell-quoted string (e.g. "-k greet -x").',
)
@click.option(
    "--image",
    is_flag=True,
    help="Test each namespace in its image, as it ships: build it (`tooldock build`'s builder and cache) and "
    "load it into the Docker engine, serve it from its worker container as `serve --backend docker` does, and "
    "run pytest in a throwaway container of the image (read-only, non-root, no network but the gateway), with "
    "tests/ mounted read-only (it is not in the image) and pytest mounted from ToolDock's installation (the "
    "image's Python must be as new as ToolDock's). Needs the Docker engine (DOCKER_HOST); every container is "
    "removed at the end.",
)
def test(namespace_dirs: tuple[Path, ...], pytest_args: str, image: bool) -> None:
    """Run each namespace's own tests/ with pytest, in the namespace's environment, against the namespace
    served as ToolDock serves it.

    The tests get the `mcp_client` fixture: a fastmcp Client connected to the namespace through a gateway
    that serves the given folders on a loopback port (`mcp_client.call("greet", name="Ada").data`). pytest
    runs in the namespace's virtualenv (its requirements, fastmcp), so a test may also import a tool file
    and call its functions. Files under tests/ are not tools and are not built into the image. pytest's
    output goes to stdout; exits 1 when a namespace's tests fail (or it has none, or it does not start).
    Made for CI, before `tooldock build`; with --image, in the namespace's image as it ships.

    \b
    Examples:
      tooldock test tools/weather
      tooldock test tools/* --pytest-args "-x -q"
      tooldock test tools/* --image
    """
    from tooldock.namespace.scanner import TESTS_DIR, scan_namespace

    try:
        extra = shlex.split(pytest_args)
    except ValueError as exc:
        raise click.ClickException(f"--pytest-args does not parse: {exc}") from None
    folders = [namespace_folder(path) for path in namespace_dirs]
    for folder in folders:
        if not (folder / TESTS_DIR).is_dir():
            raise click.ClickException(f"{folder} has no {TESTS_DIR}/ folder: nothing to run")
    config = settings()
    writable_state_dir(config.state_dir)
    if image:
        from tooldock.cli.imagetests import run_in_images

        report(folders, run_in_images(folders, extra))
        return
    sources = [scan_namespace(folder) for folder in folders]
    pythons = [asyncio.run(_environment(source, config.state_dir / "envs")) for source in sources]
    lib = test_lib(config.state_dir)
    failed: list[str] = []
    with tools_dir_of(*folders) as tools_dir, tempfile.TemporaryDirectory(prefix="tooldock-test-") as tmp:
        gateway = Gateway(tools_dir, Path(tmp) / "gateway.log")
        try:
            gateway.wait()
            for folder, python in zip(folders, pythons, strict=True):
                state, why = gateway.state_of(folder.name)
                if state != "ready":
                    click.echo(f"{folder.name}: not served ({state}): {why}", err=True)
                    failed.append(folder.name)
                    continue
                click.echo(f"{folder.name}: running its tests in {python.parent.parent}", err=True)
                code = _pytest(python, folder, lib, gateway, extra)
                if code != 0:
                    failed.append(folder.name)
        finally:
            gateway.stop()
    report(folders, failed)


def report(folders: list[Path], failed: list[str]) -> None:
    """The last line: how many passed, which failed; exit 1 if any did."""
    passed = len(folders) - len(failed)
    click.echo(
        f"{passed} of {len(folders)} namespace(s) passed" + (f"; failed: {', '.join(failed)}" if failed else ""),
        err=True,
    )
    if failed:
        sys.exit(1)
