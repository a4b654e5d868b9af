"""What an image is made of, in the terms its SBOM and provenance state it: the base and its Debian packages,
the locks and the trees installed from them, ToolDock's own files, the namespace's files, where they came from.

Gathered by the builder (build.py, gateway.py) after the image is assembled; read by sbom.py and
provenance.py. Nothing here depends on the time or the machine: the same inputs give the same materials.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldock.builder.base import DebPackage
from tooldock.builder.oci import Image
from tooldock.builder.tarball import Entry


@dataclass(frozen=True)
class LockedLayer:
    """A layer installed from a lock: `framework`, `deps` (a namespace's own) or `gateway`."""

    layer: str
    lock: str
    tree: Path | None  # where it was installed (the licences come from its dist-info METADATA)


@dataclass(frozen=True)
class Materials:
    name: str  # the image's title: the namespace, tooldock-gateway, tooldock-manager
    kind: str  # namespace | gateway | manager
    ref: str  # the tag it is written and pushed with
    image: Image
    base: Image
    base_ref: str  # "tooldock base", or what --base said
    debs: tuple[DebPackage, ...] | None  # None: a base of the user's own, whose packages ToolDock does not know
    python: str
    platform: str
    locks: tuple[LockedLayer, ...]
    own: tuple[Entry, ...]  # ToolDock's files in the image (the worker, or the whole package)
    files: tuple[Entry, ...] = ()  # the namespace's files (the app layer, tools.json included)
    folder: Path | None = None  # the namespace folder, for its git commit and repository
    lock_file: str = ""  # the namespace's requirements.lock, as committed next to it
    parameters: dict[str, Any] = field(default_factory=dict)  # the build's parameters, as the user gave them


def file_hashes(entries: tuple[Entry, ...] | list[Entry]) -> list[tuple[str, str]]:
    """(path in the image, sha256 hex) for every regular file of `entries`, sorted by path."""
    return sorted(
        (e.path, hashlib.sha256(e.content()).hexdigest()) for e in entries if not e.is_dir and e.target is None
    )


def tree_digest(entries: tuple[Entry, ...] | list[Entry], prefix: str) -> str:
    """One sha256 over files: of the lines `<sha256 hex>  <path under prefix>` sorted by path, as
    `sha256sum` prints them; anyone can recompute it with `find . -type f | sort | xargs sha256sum`."""
    lines = "".join(
        f"{digest}  {path.removeprefix(prefix).lstrip('/')}\n"
        for path, digest in file_hashes(entries)
        if path.startswith(prefix)
    )
    return hashlib.sha256(lines.encode()).hexdigest()


@dataclass(frozen=True)
class GitSource:
    commit: str
    repository: str  # the `origin` remote's URL, "" when the repository has none
    path: str  # the folder's path inside the repository
    dirty: bool  # the folder has changes not committed


def git_source(folder: Path) -> GitSource | None:
    """The commit, remote and path of `folder` when it is inside a git work tree; None otherwise."""

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "--verify", "-q", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--", ".") or ""
    remote = git("remote", "get-url", "origin") or ""
    return GitSource(commit, remote, (git("rev-parse", "--show-prefix") or "").rstrip("/"), bool(status))
