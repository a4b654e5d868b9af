"""What a namespace's image is made of before its layers are written (`Prepared`), what a build returns
(`BuildResult`), and the stages' shared helpers: validating the folder, the worker's files, the app layer's
entries, cache keys over entries. build.py composes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tooldock
from tooldock.builder.attach import Artifact
from tooldock.builder.base import BaseInfo
from tooldock.builder.blobs import cache_key
from tooldock.builder.imageconfig import APP_DIR, FRAMEWORK_DIR
from tooldock.builder.oci import Image
from tooldock.builder.platforms import LOCK_FILE, is_platform_lock, lock_file
from tooldock.builder.tarball import Entry, entries_from_dir
from tooldock.errors import BuilderError
from tooldock.namespace.credentials import credential_problems
from tooldock.namespace.models import NamespaceSource, Problem
from tooldock.namespace.names import NamespaceNameError, validate_namespace_name
from tooldock.namespace.scanner import is_test_path, scan_namespace

WORKER_PACKAGES = ("worker", "namespace")  # the parts of tooldock a worker image needs


class BuildError(BuilderError):
    """A namespace cannot be built; the message says which file, which line, and why."""


@dataclass
class Prepared:
    """Everything a namespace's image is made of, before anyone writes layers."""

    source: NamespaceSource
    base: Image
    info: BaseInfo
    worker_src: list[Entry]
    fw_key: str
    fw_tree: Path
    deps_key: str
    deps_tree: Path
    deps_text: str
    tools: list[dict[str, Any]]
    lock: str
    timings: dict[str, float]
    # resources, resourceTemplates, prompts (only the kinds it has): the io.tooldock.surface label
    surface: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    fw_lock: str = ""

    @property
    def tools_json(self) -> bytes:
        return json.dumps(self.tools, indent=2, sort_keys=True).encode() + b"\n"

    @property
    def app_entries(self) -> list[Entry]:
        return _app_entries(self.source.path, self.tools_json, self.lock, self.info.platform)

    @property
    def ref(self) -> str:
        return self.source.config.version or "latest"


@dataclass
class BuildResult:
    namespace: str
    image: Image
    ref: str
    layout: Path
    tools: list[dict[str, Any]]
    lock_hash: str
    layers: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    repository: str = ""  # for --load; default tooldock/<namespace>
    attached: list[Artifact] = field(default_factory=list)  # the SBOM and provenance (attach.py)

    def __post_init__(self) -> None:
        self.repository = self.repository or f"tooldock/{self.namespace}"

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "digest": self.image.manifest_digest,
            "ref": self.ref,
            "layout": str(self.layout),
            "config_digest": self.image.config_digest,
            "layers": self.layers,
            "tools": [t["name"] for t in self.tools],
            "lock_hash": self.lock_hash,
            "attached": {a.artifact_type: a.digest for a in self.attached},
            "timings_ms": {k: round(v * 1000, 1) for k, v in self.timings.items()},
        }


def _worker_sources() -> list[Entry]:
    """The `tooldock` package files a worker needs (never the gateway or the builder)."""
    package = Path(tooldock.__file__).resolve().parent
    entries = [Entry(f"{FRAMEWORK_DIR}/tooldock/__init__.py", source=package / "__init__.py")]
    # envvars.py: worker/tls.py declares its settings with it (a worker listening on TCP imports it)
    entries.append(Entry(f"{FRAMEWORK_DIR}/tooldock/envvars.py", source=package / "envvars.py"))
    for sub in WORKER_PACKAGES:
        for path in sorted((package / sub).glob("*.py")):
            entries.append(Entry(f"{FRAMEWORK_DIR}/tooldock/{sub}/{path.name}", source=path))
    return entries


def entries_key(kind: str, entries: list[Entry]) -> str:
    """A cache key over what a layer would contain: paths, modes, contents, link targets."""

    def one(e: Entry) -> str:
        if e.is_dir or e.target is not None:
            return f"{e.path}:{e.mode:o}:{e.target}"
        data = e.content()
        return f"{e.path}:{e.mode:o}:{hashlib.sha256(data).hexdigest()}"

    return cache_key(kind, *map(one, entries))


def _app_entries(folder: Path, tools_json: bytes, lock: str = "", python_platform: str = "") -> list[Entry]:
    """The namespace's files under /app, tools.json included. The image holds its own platform's lock as
    /app/requirements.lock, never another platform's: linux/amd64's is the folder's `requirements.lock` (as
    before --platform existed); another platform's (`requirements.linux-arm64.lock` in the folder) is written
    there instead, so each image's digest is the same whichever platforms' locks the folder has."""
    own = lock_file(python_platform) if python_platform else LOCK_FILE

    def skip(rel: str) -> bool:
        if Path(rel).name.startswith(".") or rel.endswith(".sock") or is_test_path(rel):
            return True
        return is_platform_lock(rel) or (own != LOCK_FILE and rel == LOCK_FILE)

    entries = entries_from_dir(folder, APP_DIR, skip=skip)
    if own != LOCK_FILE and lock:
        entries.append(Entry(f"{APP_DIR}/{LOCK_FILE}", lock.encode()))
    return [*entries, Entry(f"{APP_DIR}/tools.json", tools_json)]


def validate(folder: Path) -> NamespaceSource:
    if not folder.is_dir():
        raise BuildError(f"{folder}: no such directory; give the path of a namespace folder (e.g. examples/multi-tool)")
    try:
        validate_namespace_name(folder.resolve().name)
    except NamespaceNameError as exc:
        raise BuildError(f"{folder}: {exc}") from None
    source = scan_namespace(folder)
    if source.problems:
        raise BuildError(f"namespace {source.name!r} is invalid:\n{_lines(folder, source.problems)}")
    written = credential_problems(source)  # an image holds every file of the folder, and is pushed and shared
    if written:
        raise BuildError(f"namespace {source.name!r} holds credentials, not built:\n{_lines(folder, written)}")
    if not source.files:
        raise BuildError(f"namespace {source.name!r} has no tool files; add a .py file with @tool functions")
    return source


def _lines(folder: Path, problems: Iterable[Problem]) -> str:
    return "\n".join(f"  {folder.name}/{p.file}:{p.line or '-'}: {p.message}" for p in problems)
