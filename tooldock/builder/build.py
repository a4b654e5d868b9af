"""Compose the stages: one namespace folder in, one OCI image (layout, and optionally a tar) out.

Layers, bottom to top: the base's, framework (ToolDock worker + fastmcp, identical for every namespace
built with the same ToolDock version, Python and platform), namespace deps (from the lock), app (the
namespace's files and tools.json). Every layer is cached by its inputs; an edit to one tool file
rebuilds the app layer only. A Builder makes the image of one platform, the build machine's unless
`BuildOptions.platform` names another (platforms.py; multiarch.py builds several into one image index).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tooldock.builder.attach import Artifact, attestations
from tooldock.builder.base import BaseInfo, DebPackage, base_info, base_packages, build_base, foreign_compiler
from tooldock.builder.blobs import BlobStore, cache_key
from tooldock.builder.bytecode import Compiler, compiler_for, host_compiler
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
from tooldock.builder.platforms import Platform, host, lock_file
from tooldock.builder.prepared import (
    BuildError,
    BuildResult,
    Prepared,
    _worker_sources,
    entries_key,
    validate,
)
from tooldock.builder.prepared import _app_entries as _app_entries
from tooldock.builder.registry import RegistryError, looks_like_registry_ref, pull
from tooldock.builder.schema import extract, interpreter_for
from tooldock.builder.tarball import Layer, entries_from_dir, iso_time, source_date_epoch, write_entries
from tooldock.namespace.models import NamespaceSource

__all__ = ["BuildError", "BuildOptions", "BuildResult", "Builder", "Prepared", "entries_key", "validate"]


@dataclass
class BuildOptions:
    output: Path
    cache: Path
    base: str | None = None
    attach: bool = True  # the SBOM and provenance, as referrers of the image (attach.py)
    platform: Platform | None = None  # None: the build machine's (platforms.host())


class Builder:
    def __init__(
        self, options: BuildOptions, say: Callable[[str], None] = lambda _: None, machine: Builder | None = None
    ) -> None:
        self.options, self.say = options, say
        self.store = BlobStore(options.cache)
        self._base: tuple[Image, BaseInfo] | None = None
        self._compiler: Compiler | None = None  # found (and its interpreter probed) once per build run
        self._debs: tuple[DebPackage, ...] | None = None
        self._said: set[Path] = set()
        self._host = machine  # a foreign platform's: the machine's platform's Builder, which extracts the schemas

    @property
    def foreign(self) -> Platform | None:
        """The platform this Builder makes when it is not the build machine's; None for the machine's."""
        wanted = self.options.platform
        return wanted if wanted is not None and wanted != host() else None

    def host_builder(self) -> Builder:
        """A Builder of the machine's platform with the same options (multiarch.py shares one)."""
        if self._host is None:
            self._host = Builder(replace(self.options, platform=None), self.say)
        return self._host

    def debs(self) -> tuple[DebPackage, ...] | None:
        """The base's Debian packages; None for a `--base` of the user's own (ToolDock does not know them)."""
        if self.options.base is not None:
            return None
        if self._debs is None:
            foreign = self.foreign
            self._debs = tuple(base_packages(self.options.cache, foreign.architecture if foreign else None))
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
            ref, foreign = self.options.base, self.foreign
            if ref is not None and foreign is not None:
                raise BuildError(
                    f"--base with --platform {foreign}: only the default base (`tooldock base`) is built for "
                    "another platform than the machine's; leave out --base, or build on that platform"
                )
            if ref is None:
                arch = foreign.architecture if foreign else None
                self.say(f"base: tooldock base (pinned Debian packages{f', {foreign}' if foreign else ''})")
                image = build_base(self.store, self.options.cache, arch)
            else:
                image = resolve_base(ref, self.store)
            self._base = (image, base_info(image, ref or "tooldock base"))
        return self._base

    def lock(self, folder: Path) -> None:
        """Lock the namespace for this platform (written next to it when missing or outdated): a build of several
        platforms locks every platform before it installs anything, so a missing wheel is said first."""
        self._locks(validate(folder))

    def _locks(self, source: NamespaceSource) -> tuple[Target, str, str]:
        _, info = self.base()
        target = Target(info.python, info.platform, wheels_only=self.foreign is not None)
        fw_lock = framework_lock(self.options.cache, target)
        ns_lock, reused = namespace_lock(source.path, source.requirements, fw_lock, target)
        if source.has_requirements and source.path not in self._said:  # once per folder and build run
            self._said.add(source.path)
            done = "unchanged" if reused else "written"
            self.say(f"{source.name}: lock {done} ({source.name}/{lock_file(info.platform)})")
        return target, fw_lock, ns_lock

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
        foreign, cache = self.foreign, self.options.cache
        target, fw_lock, ns_lock = self._locks(source)
        lap("lock")

        worker_src = _worker_sources()
        python = interpreter_for(info.python)
        if self._compiler is None and foreign is not None:  # the machine's base interpreter, never an emulator
            found = foreign_compiler(self.store, cache, foreign.architecture)
            self._compiler = found or host_compiler(python)  # the machine's own Python 3.11 (bytecode.py)
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
        if foreign is not None:  # the tools are imported to describe them: by the machine's platform's build
            mine = self.host_builder().prepare(folder)
            described = {"tools": mine.tools, **mine.surface}
        elif schema_path.is_file():
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
        result = self.compose(folder)
        started = time.perf_counter()
        write_layout(result.layout, self.store, result.image, result.ref, result.attached)
        result.timings["write"] += time.perf_counter() - started
        return result

    def compose(self, folder: Path) -> BuildResult:
        """The image's layers, config and manifest in the store, and its attachments; no layout written yet."""
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
            return pull(store, ref, host().architecture)
        return save(store, ref)
    except (RegistryError, DaemonError) as exc:
        raise BuildError(str(exc)) from None
