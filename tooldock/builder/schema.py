"""Extract a namespace's tool schemas at build time, with its locked packages: the worker's own loader,
run on an interpreter of the image's Python version, seeing only the installed trees.

Fast path: a zygote (`tooldock.worker.zygote`) that has fastmcp imported already and forks per request,
so a rebuild after a tool edit does not pay the import again. Fallback, and `TOOLDOCK_SCHEMA_ZYGOTE=0`:
a fresh `python -m tooldock.worker --describe` per extraction.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tooldock.errors import BuilderError


class SchemaError(BuilderError):
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


_zygotes: list[subprocess.Popen[bytes]] = []


def _env(path: list[Path]) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(str(p) for p in path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": os.environ.get("HOME", "/tmp"),
    }


def _via_subprocess(python: str, folder: Path, files: list[str], path: list[Path]) -> dict[str, Any]:
    args = [python, "-S", "-m", "tooldock.worker", "--namespace", folder.name, "--dir", str(folder), "--describe"]
    for name in files:
        args += ["--file", name]
    proc = subprocess.run(args, capture_output=True, text=True, env=_env(path), cwd=str(folder))
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SchemaError(f"schema extraction for {folder.name!r} failed:\n{proc.stderr.strip()[-2000:]}") from None


def _via_zygote(python: str, folder: Path, files: list[str], path: list[Path]) -> dict[str, Any] | None:
    """Ask the zygote for this interpreter and these package trees (starting it if needed); None if it
    cannot be had, so the caller falls back to a plain subprocess."""
    key = hashlib.sha256(f"{python}|{path}".encode()).hexdigest()[:16]
    directory = Path(tempfile.gettempdir()) / f"tooldock-zygotes-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    sock_path = directory / f"{key}.sock"
    request = json.dumps({"dir": str(folder), "namespace": folder.name, "files": files}).encode() + b"\n"
    for attempt in range(2):
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.settimeout(120)
                client.connect(str(sock_path))
                client.sendall(request)
                with client.makefile("rb") as stream:
                    reply = json.loads(stream.readline() or b"null")
            if not isinstance(reply, dict) or "error" in reply:
                return None
            return reply
        except (OSError, ValueError):
            if attempt:
                return None
        idle = os.environ.get("TOOLDOCK_SCHEMA_ZYGOTE_IDLE", "300")
        _zygotes.append(
            subprocess.Popen(
                [python, "-S", "-m", "tooldock.worker.zygote", "--socket", str(sock_path), "--idle", idle],
                env=_env(path),
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + 60
        while not sock_path.exists() and _zygotes[-1].poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
    return None


def extract(python: str, folder: Path, files: list[str], path: list[Path]) -> dict[str, Any]:
    """`{"tools", "resources", "resourceTemplates", "prompts"}` of the namespace, as its worker will list them."""
    described = None
    if os.environ.get("TOOLDOCK_SCHEMA_ZYGOTE", "1") != "0":
        described = _via_zygote(python, folder, files, path)
    if described is None:
        described = _via_subprocess(python, folder, files, path)
    failed = described.get("failed_files") or []
    if failed:
        lines = "\n".join(f"  {p['file']}:{p.get('line') or '-'}: {p['message']}" for p in failed)
        raise SchemaError(
            f"namespace {folder.name!r}: some tool files fail to import with the locked packages:\n{lines}"
        )
    return {k: described.get(k) or [] for k in ("tools", "resources", "resourceTemplates", "prompts")}
