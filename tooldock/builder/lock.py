"""Lock a namespace's requirements for the image's Python and platform, with hashes (uv pip compile).

The framework (the worker's own requirements) is locked once per ToolDock version, Python and platform,
resolved as of a fixed date so the same ToolDock builds the same framework layer next month. A
namespace's lock is constrained by the framework lock, so the packages both need have one version and
the framework layer stays identical across namespaces. The namespace lock is written next to the
namespace (`requirements.lock`, to commit) and reused while `requirements.txt` is unchanged.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from uv import find_uv_bin

from tooldock.builder.blobs import atomic_write
from tooldock.builder.platforms import lock_file, wheel_problem
from tooldock.errors import BuilderError
from tooldock.worker import FRAMEWORK_REQUIREMENTS

FRAMEWORK_RESOLVED_AS_OF = "2026-11-20T00:00:00Z"
_HEADER = "# tooldock-lock: "
_PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s\\;]+)", re.M)


class LockError(BuilderError):
    pass


@dataclass(frozen=True)
class Target:
    python: str  # "3.11"
    platform: str  # uv's --python-platform, e.g. "x86_64-manylinux_2_36"
    # another platform than the build machine's (platforms.py): resolved and installed from wheels only. Not in
    # str(target), which cache keys are made of: a platform is either the machine's or not, on a given machine
    wheels_only: bool = field(default=False, repr=False)


def _uv(*args: str) -> str:
    proc = subprocess.run([find_uv_bin(), *args], capture_output=True, text=True, env=uv_env())
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-12:])
        raise LockError(tail)
    return proc.stdout


def uv_env() -> dict[str, str]:
    import os

    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


def pins(lock_text: str) -> dict[str, str]:
    """Normalised package name -> version, from a lock file."""
    return {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(3) for m in _PIN_RE.finditer(lock_text)}


def compile_requirements(
    requirements: str, target: Target, *, constraints: str | None = None, exclude_newer: str | None = None
) -> str:
    with tempfile.TemporaryDirectory(prefix="tooldock-lock-") as tmp:
        req = Path(tmp) / "requirements.in"
        req.write_text(requirements)
        args = [
            "pip",
            "compile",
            "--quiet",
            "--no-header",
            "--generate-hashes",
            "--no-annotate",
            "--python-version",
            target.python,
            "--python-platform",
            target.platform,
            str(req),
        ]
        if target.wheels_only:
            args += ["--only-binary", ":all:"]
        if constraints is not None:
            (Path(tmp) / "constraints.txt").write_text(constraints)
            args += ["--constraint", str(Path(tmp) / "constraints.txt")]
        if exclude_newer:
            args += ["--exclude-newer", exclude_newer]
        return _uv(*args)


def dated_lock(cache: Path, kind: str, requirements: str, target: Target) -> str:
    """A lock of ToolDock's own requirements (`kind`: framework, gateway), resolved as of a fixed date and
    cached by its inputs: the same ToolDock locks the same versions next month."""
    path = dated_lock_path(cache, kind, requirements, target)
    if path.is_file():
        return path.read_text()
    try:
        text = compile_requirements(requirements, target, exclude_newer=FRAMEWORK_RESOLVED_AS_OF)
    except LockError as exc:
        what = f"the {kind}'s requirements"
        raise LockError(
            wheel_problem(str(exc), target.platform, what)
            or f"cannot lock {what} for Python {target.python} ({target.platform}):\n{exc}"
        ) from None
    atomic_write(path, text.encode())
    return text


def dated_lock_path(cache: Path, kind: str, requirements: str, target: Target) -> Path:
    """Where `dated_lock` keeps that lock in the build cache."""
    key = hashlib.sha256(f"{requirements}|{target}|{FRAMEWORK_RESOLVED_AS_OF}".encode()).hexdigest()[:16]
    return cache / "locks" / f"{kind}-{key}.lock"


def framework_lock(cache: Path, target: Target) -> str:
    return dated_lock(cache, "framework", "\n".join(FRAMEWORK_REQUIREMENTS) + "\n", target)


def framework_lock_path(cache: Path, target: Target) -> Path:
    return dated_lock_path(cache, "framework", "\n".join(FRAMEWORK_REQUIREMENTS) + "\n", target)


def namespace_lock(folder: Path, requirements: str, framework: str, target: Target) -> tuple[str, bool]:
    """The namespace's lock text, and whether it was reused. Raises LockError with uv's reason."""
    fingerprint = hashlib.sha256(
        f"{requirements}|{target}|{hashlib.sha256(framework.encode()).hexdigest()}".encode()
    ).hexdigest()
    path = folder / lock_file(target.platform)
    if not requirements.strip():
        return "", True  # nothing to lock: no file is written into the namespace
    if path.is_file():
        existing = path.read_text()
        if existing.startswith(_HEADER + fingerprint):
            return existing, True
    try:
        text = compile_requirements(requirements, target, constraints=framework)
    except LockError as exc:
        no_wheel = wheel_problem(str(exc), target.platform, f"{folder.name}/requirements.txt")
        if no_wheel:
            raise LockError(no_wheel) from None
        raise LockError(
            f"cannot resolve {folder.name}/requirements.txt for Python {target.python} ({target.platform}):\n{exc}\n"
            "Check the package names and versions; versions shared with the worker framework must be "
            "compatible with it."
        ) from None
    body = (
        f"{_HEADER}{fingerprint}\n# Generated by `tooldock build` from requirements.txt; commit it. "
        f"Python {target.python}, {target.platform}.\n{text}"
    )
    atomic_write(path, body.encode())
    return body, False


def _normalized(pin_line: str) -> str:
    """The PEP 503 name of the package a `name==version` line pins (the line matched _PIN_RE)."""
    match = _PIN_RE.match(pin_line)
    assert match is not None
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def only_new(lock_text: str, framework: str) -> str:
    """The requirement blocks of `lock_text` whose package the framework does not already provide."""
    have = pins(framework)
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in lock_text.splitlines():
        if _PIN_RE.match(line):
            if current:
                blocks.append(current)
            current = [line]
        elif current and line.startswith(" "):
            current.append(line)
    if current:
        blocks.append(current)
    keep = [b for b in blocks if _normalized(b[0]) not in have]
    return "\n".join("\n".join(b) for b in keep) + ("\n" if keep else "")


@dataclass(frozen=True)
class Locked:
    """One package of a lock: its normalised name, version and the `--hash` values uv wrote for it."""

    name: str
    version: str
    hashes: tuple[str, ...]  # "sha256:<hex>", one per wheel or sdist the lock allows


def locked(lock_text: str) -> list[Locked]:
    """Every `name==version` block of a lock, with its hashes (what the SBOM lists)."""
    found: list[Locked] = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", lock_text):
        match = _PIN_RE.match(block)
        if match:
            name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
            found.append(Locked(name, match.group(3), tuple(re.findall(r"--hash=(sha256:[0-9a-f]{64})", block))))
    return found
