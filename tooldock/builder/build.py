"""Compose the stages: one namespace folder in, one OCI image (layout, and optionally a tar) out.

Layers, bottom to top: the base's, framework (ToolDock worker + fastmcp, identical for every namespace
built with the same ToolDock version, Python and platform), namespace deps (from the lock), app (the
namespace's files and tools.json). Every layer is cached by its inputs; an edit to one tool file
rebuilds the app layer only.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tooldock
from tooldock.builder.attach import Artifact, attestations
from tooldock.builder.base import BaseInfo, DebPackage, base_info, base_packages, build_base
from tooldock.builder.blobs import BlobStore, cache_key
from tooldock.builder.bytecode import Compiler, compiler_for
from tooldock.builder.daemon import DaemonError, save
from tooldock.builder.imageconfig import (
    APP_DIR,
    DEPS_DIR,
    FRAMEWORK_DIR,
    USER,
    entrypoint,
    environment,
    image_config,
    labels,
)
from tooldock.builder.install import SCRIPTS, filler, tree
from tooldock.builder.lock import Target, framework_lock, namespace_lock, only_new
from tooldock.builder.materials import LockedLayer, Materials
from tooldock.builder.oci import Image, LayoutError, assemble, read_layout, write_layout
from tooldock.builder.registry import RegistryError, looks_like_registry_ref, pull
from tooldock.builder.schema import extract, interpreter_for
from tooldock.builder.tarball import Entry, Layer, entries_from_dir, iso_time, source_date_epoch, write_entries
from tooldock.errors import BuilderError
from tooldock.namespace.credentials import credential_problems
from tooldock.namespace.models import NamespaceSource, Problem
from tooldock.namespace.names import NamespaceNameError, validate_namespace_name
from tooldock.namespace.scanner import is_test_path, scan_namespace

WORKER_PACKAGES = ("worker", "namespace")  # the parts of tooldock a worker image needs


class BuildError(BuilderError):
    """A namespace cannot be built; the message says which file, which line, and why."""


@dataclass
class BuildOptions:
    output: Path
    cache: Path
    base: str | None = None
    attach: bool = True  # the SBOM and provenance, as referrers of the image (attach.py)


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
        return _app_entries(self.source.path, self.tools_json)

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


def _app_entries(folder: Path, tools_json: bytes) -> list[Entry]:
    entries = entries_from_dir(
        folder,
        APP_DIR,
        skip=lambda rel: Path(rel).name.startswith(".") or rel.endswith(".sock") or is_test_path(rel),
    )
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


class Builder:
    def __init__(self, options: BuildOptions, say: Callable[[str], None] = lambda _: None) -> None:
        self.options, self.say = options, say
        self.store = BlobStore(options.cache)
        self._base: tuple[Image, BaseInfo] | None = None
        self._compiler: Compiler | None = None  # found (and its interpreter probed) once per build run
        self._debs: tuple[DebPackage, ...] | None = None

    def debs(self) -> tuple[DebPackage, ...] | None:
        """The base's Debian packages; None for a `--base` of the user's own (ToolDock does not know them)."""
        if self.options.base is not None:
            return None
        if self._debs is None:
            self._debs = tuple(base_packages(self.options.cache))
        return self._debs

    def attest(self, materials: Materials, timings: dict[str, float]) -> list[Artifact]:
        """The SBOM and provenance of `materials.image`, unless --no-attach."""
        if not self.options.attach:
            return []
        started = time.perf_counter()
        attached = attestations(self.store, materials)
        timings["attest"] = time.perf_counter() - started
        return attached

    def base(self) -> tuple[Image, BaseInfo]:
        if self._base is None:
            ref = self.options.base
            if ref is None:
                self.say("base: tooldock base (pinned Debian packages)")
                image = build_base(self.store, self.options.cache)
            else:
                image = resolve_base(ref, self.store)
            self._base = (image, base_info(image, ref or "tooldock base"))
        return self._base

    def prepare(self, folder: Path) -> Prepared:
        """Validate, lock, install and extract: the stages both image writers share."""
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[name] = timings.get(name, 0.0) + now - clock
            clock = now

        source = validate(folder)
        lap("validate")
        base, info = self.base()
        lap("base")
        target = Target(info.python, info.platform)
        cache = self.options.cache
        fw_lock = framework_lock(cache, target)
        ns_lock, reused = namespace_lock(source.path, source.requirements, fw_lock, target)
        if source.has_requirements:
            self.say(f"{source.name}: lock {'unchanged' if reused else 'written'} ({source.name}/requirements.lock)")
        lap("lock")

        worker_src = _worker_sources()
        python = interpreter_for(info.python)
        if self._compiler is None:
            self._compiler = compiler_for(self.store, base, info.python_bin, info.python, cache, python)
        compiler = self._compiler
        worker_key = entries_key("worker", worker_src)
        fw_key = cache_key("framework", SCRIPTS, fw_lock, str(target), worker_key, compiler.identity)

        def fill(lock_text: str, image_dir: str) -> Callable[[Path], None]:
            return filler(lock_text, target, python, (compiler, image_dir))

        fw_tree, _ = tree(cache, "framework", fw_key, fill(fw_lock, FRAMEWORK_DIR))
        deps_text = only_new(ns_lock, fw_lock)
        deps_key = cache_key("deps", SCRIPTS, deps_text, str(target), compiler.identity)
        deps_tree, _ = tree(cache, "deps", deps_key, fill(deps_text, DEPS_DIR))
        lap("install")

        files = [f.filename for f in source.files]
        key = cache_key("schema-v2", fw_key, deps_key, source.fingerprint, *files)[:32]
        schema_path = cache / "schemas" / f"{key}.json"
        if schema_path.is_file():
            described = json.loads(schema_path.read_text())
        else:
            with_worker, _ = tree(cache, "worker", fw_key, lambda d: write_entries(worker_src, FRAMEWORK_DIR, d))
            described = extract(python, source.path, files, [deps_tree, with_worker, fw_tree])
            schema_path.parent.mkdir(parents=True, exist_ok=True)
            schema_path.write_text(json.dumps(described))
        lap("schema")
        tools, surface = described["tools"], {k: v for k, v in described.items() if k != "tools" and v}
        return Prepared(
            source,
            base,
            info,
            worker_src,
            fw_key,
            fw_tree,
            deps_key,
            deps_tree,
            deps_text,
            tools,
            ns_lock,
            timings,
            surface,
            fw_lock,
        )

    def build(self, folder: Path) -> BuildResult:
        """The daemonless route: reproducible layers, written as an OCI layout."""
        p = self.prepare(folder)
        started = time.perf_counter()
        named: list[tuple[str, Layer, bool]] = [
            (
                "framework",
                *self.store.layer(
                    p.fw_key, lambda: [*entries_from_dir(p.fw_tree, FRAMEWORK_DIR, bytecode=True), *p.worker_src]
                ),
            )
        ]
        if p.deps_text:
            named.append(
                ("deps", *self.store.layer(p.deps_key, lambda: entries_from_dir(p.deps_tree, DEPS_DIR, bytecode=True)))
            )
        app_entries = p.app_entries
        named.append(("app", *self.store.layer(entries_key("app", app_entries), lambda: app_entries)))
        p.timings["layers"] = time.perf_counter() - started

        started = time.perf_counter()
        image = self._assemble(p, [(n, layer) for n, layer, _ in named])
        layout = self.options.output / p.source.name
        p.timings["write"] = time.perf_counter() - started
        attached = self.attest(self.materials(p, image), p.timings)
        started = time.perf_counter()
        write_layout(layout, self.store, image, p.ref, attached)
        p.timings["write"] += time.perf_counter() - started
        return BuildResult(
            p.source.name,
            image,
            p.ref,
            layout,
            p.tools,
            hashlib.sha256(p.lock.encode()).hexdigest(),
            [{"name": "base", "digest": layer.digest, "size": layer.size, "cached": True} for layer in p.base.layers]
            + [{"name": n, "digest": layer.digest, "size": layer.size, "cached": hit} for n, layer, hit in named],
            p.timings,
            attached=attached,
        )

    def materials(self, p: Prepared, image: Image) -> Materials:
        return Materials(
            p.source.name,
            "namespace",
            p.ref,
            image,
            p.base,
            self.options.base or "tooldock base",
            self.debs() if self.options.attach else None,
            p.info.python,
            p.info.platform,
            (LockedLayer("framework", p.fw_lock, p.fw_tree), LockedLayer("deps", p.deps_text, p.deps_tree)),
            tuple(p.worker_src),
            tuple(p.app_entries),
            p.source.path,
            p.lock,
        )

    def _assemble(self, p: Prepared, named: list[tuple[str, Layer]]) -> Image:
        base_config = p.base.config_json
        created = iso_time(source_date_epoch())
        inner = base_config.get("config") or {}
        runtime = {
            "User": USER,
            "WorkingDir": APP_DIR,
            "Entrypoint": entrypoint(p.info),
            "Env": [f"{k}={v}" for k, v in environment(p.source, inner.get("Env", []))],
            "Labels": {**(inner.get("Labels") or {}), **labels(p.source, p.tools, p.lock, created, p.surface)},
            "Volumes": {"/run/tooldock": {}},
        }
        added = [(f"tooldock build: {name} layer", layer.diff_id) for name, layer in named]
        config = image_config(base_config, created, runtime, added)
        annotations = {
            "org.opencontainers.image.created": created,
            "org.opencontainers.image.title": p.source.name,
            "io.tooldock.namespace": p.source.name,
        }
        return assemble(self.store, config, [*p.base.layers, *(layer for _, layer in named)], annotations)


def resolve_base(ref: str, store: BlobStore) -> Image:
    """`--base`: an OCI layout directory, a registry reference (host/...), or an image in the Docker engine."""
    if Path(ref).is_dir():
        try:
            return read_layout(Path(ref), store)
        except LayoutError as exc:
            raise BuildError(str(exc)) from None
    if ref.startswith(("/", "./", "../", "~")):
        raise BuildError(f"--base {ref!r}: no such OCI layout directory")
    try:
        if looks_like_registry_ref(ref):
            return pull(store, ref, {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine()))
        return save(store, ref)
    except (RegistryError, DaemonError) as exc:
        raise BuildError(str(exc)) from None
