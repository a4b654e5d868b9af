"""`install_pip_packages`: Python packages for the manager's own use (seed 000: "a parser for a specific
language"), installed into an environment of the manager's own under the state directory, never into the
gateway's interpreter or a namespace's environment.

The environment is a uv virtualenv on the manager's Python (`<state>/manager/env`); its site-packages
directory is appended to the manager process's `sys.path`, after everything the manager ships with, so an
installed package can add to what the manager imports but never replace one of its own modules. Each call
installs the given specifiers (checked like `add_requirement`'s: index packages only, no options or URLs).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from uv import find_uv_bin

from tooldock.errors import DependencyError, InvalidInput
from tooldock.manager.deps import parse_specifier

MAX_PACKAGES = 20
INSTALL_TIMEOUT = 600.0


class OwnEnvironment:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = asyncio.Lock()

    @property
    def site_packages(self) -> Path:
        relative = Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
        return self.root / relative

    def activate(self) -> None:
        """Make what was installed importable in this process (appended: the manager's own modules win)."""
        site = str(self.site_packages)
        if self.site_packages.is_dir() and site not in sys.path:
            sys.path.append(site)
        importlib.invalidate_caches()

    async def install(self, packages: object) -> dict[str, Any]:
        if not isinstance(packages, list) or not packages or len(packages) > MAX_PACKAGES:
            raise InvalidInput(
                f"packages must be a list of 1 to {MAX_PACKAGES} specifiers, e.g. ['tree-sitter-rust>=0.23']"
            )
        specs = [str(parse_specifier(p)) for p in packages]
        async with self._lock:
            python = self.root / "bin" / "python"
            if not python.exists():
                shutil.rmtree(self.root, ignore_errors=True)  # a half-made environment from an interrupted call
                self.root.parent.mkdir(parents=True, exist_ok=True)
                await _uv("venv", "--quiet", "--python", sys.executable, str(self.root))
            await _uv("pip", "install", "--quiet", "--python", str(python), *specs)
        self.activate()
        return {"installed": True, "packages": specs, "environment": str(self.root)}


async def _uv(*args: str) -> None:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    proc = await asyncio.create_subprocess_exec(
        find_uv_bin(), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), INSTALL_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise DependencyError(f"uv {args[0]} did not finish within {INSTALL_TIMEOUT:g}s") from None
    if proc.returncode != 0:
        tail = "\n".join(out.decode(errors="replace").strip().splitlines()[-15:])
        raise DependencyError(f"installing into the manager's own environment failed (uv {args[0]}):\n{tail}")
