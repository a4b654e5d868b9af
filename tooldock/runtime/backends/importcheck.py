"""`tooldock check --import`: import each namespace's files in its own environment, as a worker would, and
report what fails, without starting a gateway.

The static scan cannot see an import that fails (a missing package, a name the package does not have, code
that raises at import) or a decorated function that importing does not make a tool; a worker reports them
when it starts. This runs the worker's own `--describe` in the namespace's environment (made with uv and
cached as `serve` makes it, so a later `serve` reuses it), with the namespace's `env` and no secret values:
a file that reads a secret at import fails here (read it inside the tool instead).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldock.errors import DependencyError
from tooldock.namespace.models import NamespaceSource, Problem
from tooldock.runtime.backends.environments import Environments
from tooldock.runtime.backends.process import worker_env, worker_lib

IMPORT_TIMEOUT = 120.0  # seconds for one namespace's files to import (user code may block at import)


@dataclass
class Imported:
    """One namespace's import: the tools it serves and the problems (the worker's `failed_files` shape)."""

    tools: list[str] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)


def _problem(file: str, message: str, code: str) -> dict[str, Any]:
    return Problem(file, message, None, code).to_dict()


async def import_namespace(source: NamespaceSource, envs: Environments, lib: Path) -> Imported:
    cfg = source.config
    try:
        python, _ = await envs.ensure(source.name, source.path / "requirements.txt", source.requirements, cfg.python)
    except DependencyError as exc:
        return Imported(problems=[_problem("requirements.txt", exc.message, "dependency_error")])
    args = ["-s", "-m", "tooldock.worker", "--namespace", source.name, "--dir", str(source.path), "--describe"]
    for tool_file in source.files:
        args += ["--file", tool_file.filename]
    proc = await asyncio.create_subprocess_exec(
        str(python),
        *args,
        cwd=str(source.path),
        env=worker_env(source, lib, {}),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), IMPORT_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        message = f"importing the files did not finish in {IMPORT_TIMEOUT:.0f} s (code that blocks at import?)"
        return Imported(problems=[_problem("-", message, "import_error")])
    try:
        described = json.loads(out)
    except ValueError:  # the worker died before it could describe anything: its last words say why
        tail = " | ".join(err.decode(errors="replace").strip().splitlines()[-5:]) or f"exit code {proc.returncode}"
        return Imported(problems=[_problem("-", f"the worker could not import the files: {tail}", "import_error")])
    return Imported([t["name"] for t in described.get("tools", [])], list(described.get("failed_files", [])))


async def import_all(sources: list[NamespaceSource], state_dir: Path) -> dict[str, Imported]:
    """Each namespace of tool files imported, a few at a time (upstream namespaces have nothing to import)."""
    envs, lib = Environments(state_dir / "envs"), worker_lib(state_dir)
    limit = asyncio.Semaphore(max(1, min(4, os.cpu_count() or 1)))

    async def one(source: NamespaceSource) -> tuple[str, Imported]:
        async with limit:
            return source.name, await import_namespace(source, envs, lib)

    done = await asyncio.gather(*(one(s) for s in sources if not s.is_upstream and s.files))
    return dict(done)
