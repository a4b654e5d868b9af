"""A namespace's `requirements.txt` (seed 000, "Dependencies"): list, add one specifier, install.

Only plain PEP 508 specifiers from an index are accepted (`httpx`, `httpx>=0.28`, `beautifulsoup4==4.12.0`,
with extras and markers): no `-r`/`-e`/`--index-url` options, no URLs or local paths, which would let a
chat message point the installer at arbitrary code or files. Installing is the backend's job (a virtualenv
for `process`, the image's dependency layer for `docker`); `add_requirement` installs right away and puts the
old file back when the install fails, so a bad package never stays in `requirements.txt`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tooldock.errors import BuilderError, DependencyError, InvalidInput
from tooldock.manager.workspace import MAX_REQUIREMENT_LINES, Workspace, atomic_write
from tooldock.namespace.scanner import REQUIREMENTS_FILE

REQUIREMENTS = REQUIREMENTS_FILE  # the name the gateway's scan reads
MAX_SPECIFIER = 200

# Installs a namespace's requirements as its backend will run them; raises DependencyError / BuilderError.
Installer = Callable[[Path], Awaitable[None]]


def parse_specifier(package: object) -> Requirement:
    if not isinstance(package, str) or not package.strip():
        raise InvalidInput("package must be a requirement specifier such as 'httpx' or 'httpx>=0.28.0'")
    text = package.strip()
    if len(text) > MAX_SPECIFIER or "\n" in text or "\r" in text:
        raise InvalidInput(f"package must be one specifier on one line, at most {MAX_SPECIFIER} characters")
    if text.startswith("-"):
        raise InvalidInput(f"{text!r}: pip options are not accepted; give a package name such as 'httpx>=0.28'")
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise InvalidInput(
            f"{text!r} is not a valid requirement specifier ({exc}); use e.g. 'httpx', 'httpx>=0.28.0' "
            "or 'beautifulsoup4==4.12.0'"
        ) from None
    if requirement.url:
        raise InvalidInput(f"{text!r}: direct URLs are not accepted; name a package from the index instead")
    return requirement


def read_requirements(path: Path) -> list[str]:
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def list_requirements(ws: Workspace, namespace: object) -> dict[str, Any]:
    path = ws.metadata_file(namespace, REQUIREMENTS)
    return {"namespace": path.parent.name, "packages": read_requirements(path)}


def _same_package(line: str, name: str) -> bool:
    try:
        return canonicalize_name(Requirement(line).name) == name
    except InvalidRequirement:
        return False


async def install(path: Path, installer: Installer) -> dict[str, Any]:
    """The seed's `install_requirements` answer for this requirements file."""
    namespace, packages = path.parent.name, read_requirements(path)
    try:
        await installer(path.parent)
    except (DependencyError, BuilderError) as exc:
        details = getattr(exc, "message", None) or str(exc)
        return {"installed": False, "namespace": namespace, "error": "pip install failed", "details": details}
    return {"installed": True, "namespace": namespace, "packages": packages}


def _restore(path: Path, before: bytes | None) -> None:
    if before is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, before)


async def add_requirement(ws: Workspace, namespace: object, package: object, installer: Installer) -> dict[str, Any]:
    requirement = parse_specifier(package)
    path = ws.metadata_file(namespace, REQUIREMENTS)
    ws.refuse_upstream(namespace, "a requirement")
    before = path.read_bytes() if path.is_file() else None
    name = canonicalize_name(requirement.name)
    kept = [line for line in read_requirements(path) if not _same_package(line, name)]
    if len(kept) >= MAX_REQUIREMENT_LINES:
        raise InvalidInput(f"requirements.txt already lists {len(kept)} packages; at most {MAX_REQUIREMENT_LINES}")
    specifier = str(requirement)
    atomic_write(path, ("\n".join([*kept, specifier]) + "\n").encode())
    try:
        result = await install(path, installer)
    except BaseException:  # a crash or a cancelled request: the package was not installed, so it is not added
        _restore(path, before)
        raise
    if not result["installed"]:  # put the file back as it was: a package that does not install is not added
        _restore(path, before)
        return {"added": False, "package": specifier, "namespace": path.parent.name, **result}
    return {"added": True, "package": specifier, "namespace": path.parent.name}
