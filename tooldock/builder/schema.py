"""Extract a namespace's tool schemas at build time, with its locked packages: the worker's own
`--describe`, run on an interpreter of the image's Python version, seeing only the installed trees."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


class SchemaError(RuntimeError):
    pass


def interpreter_for(version: str) -> str:
    """A local Python of the image's major.minor version (imports must behave as they will in the image)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return getattr(sys, "_base_executable", None) or sys.executable
    found = shutil.which(f"python{version}")
    if found is None:
        raise SchemaError(
            f"the image runs Python {version}, but there is no python{version} on this machine to extract "
            "tool schemas with; install it or use a base image with this machine's Python"
        )
    return found


def extract(python: str, folder: Path, files: list[str], path: list[Path]) -> list[dict[str, Any]]:
    args = [python, "-S", "-m", "tooldock.worker", "--namespace", folder.name, "--dir", str(folder), "--describe"]
    for name in files:
        args += ["--file", name]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(str(p) for p in path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=str(folder))
    try:
        described = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SchemaError(f"schema extraction for {folder.name!r} failed:\n{proc.stderr.strip()[-2000:]}") from None
    failed = described.get("failed_files") or []
    if failed:
        lines = "\n".join(f"  {p['file']}:{p.get('line') or '-'}: {p['message']}" for p in failed)
        raise SchemaError(f"namespace {folder.name!r}: some tool files fail to import with the locked packages:\n{lines}")
    return described["tools"]
