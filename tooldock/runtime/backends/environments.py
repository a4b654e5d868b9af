"""Worker virtualenvs, made with uv and keyed by what goes into them.

An environment's key is the hash of the worker framework pin, the namespace's requirements and the
Python it runs on, so namespaces without requirements share one base environment, and an unchanged
`requirements.txt` never triggers a sync. Each environment is built in a temporary directory and renamed
into place when complete: a half-built environment is never used, and a running worker's environment is
never modified under it.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from uv import find_uv_bin

from tooldock.errors import DependencyError
from tooldock.worker import FRAMEWORK_REQUIREMENTS

log = logging.getLogger("tooldock.environments")
READY_MARKER = ".tooldock-ready"
BYTECODE = "compiled"  # in the key: environments made before they carried bytecode are made again


def environment_key(requirements: str, python: str | None) -> str:
    lines = sorted(line.strip() for line in requirements.splitlines() if line.strip() and not line.startswith("#"))
    parts = [*FRAMEWORK_REQUIREMENTS, "--", *lines, "--", python or sys.version.split()[0], BYTECODE]
    material = "\n".join(parts)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


class Environments:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, asyncio.Lock] = {}

    def interpreter(self, key: str) -> Path:
        return self.root / key / "bin" / "python"

    def ready(self, requirements: str = "", python: str | None = None) -> Path | None:
        """The interpreter of the environment for these requirements if it is built already, else None."""
        key = environment_key(requirements, python)
        return self.interpreter(key) if (self.root / key / READY_MARKER).is_file() else None

    async def ensure(
        self, namespace: str, requirements_file: Path | None, requirements: str, python: str | None
    ) -> tuple[Path, bool]:
        """The interpreter of the environment for these requirements, and whether it had to be built."""
        key = environment_key(requirements, python)
        final = self.root / key
        if (final / READY_MARKER).is_file():
            return self.interpreter(key), False
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if (final / READY_MARKER).is_file():
                return self.interpreter(key), False
            await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
            lock_fd = await asyncio.to_thread(os.open, str(self.root / f"{key}.lock"), os.O_CREAT | os.O_RDWR, 0o600)
            try:  # another gateway on the same state dir may be building the same environment
                await asyncio.to_thread(fcntl.flock, lock_fd, fcntl.LOCK_EX)
                if not (final / READY_MARKER).is_file():
                    await self._build(namespace, final, requirements_file if requirements.strip() else None, python)
            finally:
                os.close(lock_fd)
            return self.interpreter(key), True

    async def _run(self, *args: str) -> None:
        env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
        proc = await asyncio.create_subprocess_exec(
            find_uv_bin(), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            tail = "\n".join(out.decode(errors="replace").strip().splitlines()[-15:])
            raise DependencyError(f"uv {args[0]} {args[1] if len(args) > 1 else ''} failed:\n{tail}")

    async def _build(self, namespace: str, final: Path, requirements_file: Path | None, python: str | None) -> None:
        what = f"requirements.txt of {namespace!r}" if requirements_file else "the base environment"
        print(f"tooldock: installing {what} into {final} (uv) ...", file=sys.stderr, flush=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=self.root))
        try:
            await self._run("venv", "--quiet", "--relocatable", "--python", python or sys.executable, str(tmp))
            framework = tmp / "tooldock-framework.txt"
            framework.write_text("\n".join(FRAMEWORK_REQUIREMENTS) + "\n")
            # Bytecode at install: workers run with PYTHONDONTWRITEBYTECODE (several share an environment), so
            # without it every worker and fork server start would compile the framework from source again.
            python_bin = str(tmp / "bin" / "python")
            args = ["pip", "install", "--quiet", "--compile-bytecode", "--python", python_bin, "-r", str(framework)]
            if requirements_file is not None:
                args += ["-r", str(requirements_file)]
            await self._run(*args)
            (tmp / READY_MARKER).write_text("ok\n")
            if final.exists():  # a leftover from an interrupted build: it has no ready marker
                shutil.rmtree(final)
            os.replace(tmp, final)
        except DependencyError as exc:
            raise DependencyError(
                f"cannot install the dependencies of namespace {namespace!r}: {exc.message}\n"
                "Check the namespace's requirements.txt (package names and versions) and reload."
            ) from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        print(f"tooldock: environment for {namespace!r} ready", file=sys.stderr, flush=True)
