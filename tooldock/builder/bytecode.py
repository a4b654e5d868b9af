"""Bytecode in the image, compiled reproducibly by the image's own Python.

A worker container is read-only, so Python cannot write bytecode there: without `.pyc` files in the image,
every start compiles the standard library and the framework again (about a second). The builder compiles
them at build time instead: hash-based pycs (`unchecked-hash`: no mtimes, and files never change in an
image), each source recorded as its path in the image, a fixed hash seed, and compiled by the base image's
own interpreter, run on this machine through the base's dynamic loader and libraries (extracted once into
the build cache), so the bytes depend on the base image and the sources only, not on which Python the
build machine has. When that cannot run (another architecture, a base without a glibc loader), the build
machine's Python of the same minor version compiles instead, and its exact version enters the cache keys.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tooldock.builder.blobs import BlobStore, cache_key
from tooldock.builder.oci import Image

LOADERS = {"lib64/ld-linux-x86-64.so.2": "x86_64-linux-gnu", "lib/ld-linux-aarch64.so.1": "aarch64-linux-gnu"}
WANTED = ("lib/", "lib64/", "usr/lib/", "usr/bin/")
HASHED = ("--invalidation-mode", "unchecked-hash")


@dataclass(frozen=True)
class Compiler:
    argv: tuple[str, ...]  # runs a Python of the image's version
    env: tuple[tuple[str, str], ...]
    identity: str  # for cache keys: what compiled the bytecode

    def compile(self, tree: Path, image_dir: str) -> None:
        """Byte-compile every module under `tree`, recorded as under `image_dir` in the image."""
        subprocess.run(
            [*self.argv, "-s", "-m", "compileall", "-q", "-f", "-j", "0", *HASHED, "-d", image_dir, str(tree)],
            capture_output=True,
            env=clean_env(self.env),
        )


def clean_env(extra: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """No bytecode written by the interpreter's own imports (it would record this machine's paths and
    mtimes: `-f` above then rewrites every pyc as hash-based), and a fixed hash seed."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    return {**base, **dict(extra)}


def host_compiler(python: str) -> Compiler:
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True)
    return Compiler((python,), (), f"host python {version.stdout.strip() or python}")


def _safe_extract(layer: Path, root: Path) -> None:
    """The loader, libraries and interpreter of a base layer under `root`: regular files, directories and
    symlinks (absolute ones re-pointed inside `root`); nothing can land outside it."""
    links: list[tuple[Path, str]] = []
    with gzip.open(layer) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
        for member in tar:
            name = PurePosixPath(member.name.lstrip("./").lstrip("/"))
            if ".." in name.parts or not str(name).startswith(WANTED):
                continue
            target = root / name
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is not None:
                    with open(target, "wb") as out:
                        shutil.copyfileobj(source, out)
                    target.chmod(0o755 if member.mode & 0o111 else 0o644)
            elif member.issym():
                links.append((target, member.linkname))
            elif member.islnk():  # a hard link names its target by its path in the archive
                links.append((target, "/" + member.linkname.lstrip("./").lstrip("/")))
    for target, link in links:
        pointed = root / link.lstrip("/") if link.startswith("/") else target.parent / link
        if not os.path.realpath(pointed).startswith(str(root.resolve()) + os.sep):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() and not target.is_symlink():
            target.symlink_to(os.path.relpath(pointed, target.parent))


def image_compiler(store: BlobStore, base: Image, python_bin: str, version: str, cache: Path) -> Compiler | None:
    """The base image's interpreter, runnable here; None when it cannot run on this machine."""
    key = cache_key("interpreter", *(layer.digest for layer in base.layers))
    root = cache / "interpreters" / key[:24]
    if not (root / ".complete").is_file():
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root.parent))
        try:
            for layer in base.layers:
                _safe_extract(store.path(layer.digest), staging)
            (staging / ".complete").write_text("ok\n")
            if not (root / ".complete").is_file():  # a half one a killed build left; not one another build made
                shutil.rmtree(root, ignore_errors=True)
            staging.rename(root)
        except (OSError, tarfile.TarError, EOFError):
            shutil.rmtree(staging, ignore_errors=True)
            if not (root / ".complete").is_file():  # else another build sharing the cache made it meanwhile
                return None
    return rootfs_compiler(root, python_bin, version, f"base python {key}")


def rootfs_compiler(root: Path, python_bin: str, version: str, identity: str) -> Compiler | None:
    """The interpreter of an unpacked root file system, run through its own loader and libraries."""
    found = next(((root / loader, triplet) for loader, triplet in LOADERS.items() if (root / loader).exists()), None)
    if found is None:
        return None
    loader, triplet = found
    libraries = f"{root}/lib/{triplet}:{root}/usr/lib/{triplet}"
    argv = (str(loader), "--library-path", libraries, str(root / python_bin.lstrip("/")))
    env = clean_env((("PYTHONHOME", str(root / "usr")),))
    try:
        probe = subprocess.run(
            [*argv, "-s", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if probe.returncode != 0 or probe.stdout.strip() != version:
        return None
    return Compiler(argv, (("PYTHONHOME", env["PYTHONHOME"]),), identity)


def compiler_for(store: BlobStore, base: Image, python_bin: str, version: str, cache: Path, python: str) -> Compiler:
    found = image_compiler(store, base, python_bin, version, cache) if sys.platform == "linux" else None
    return found or host_compiler(python)
