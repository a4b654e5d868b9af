"""Install a lock into a directory tree for the image (uv pip install --target), cached by key.

Trees are kept in the build cache: the layer made from a tree is cached by the same key, and the tree
itself is what schema extraction imports at build time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from uv import find_uv_bin

from tooldock.builder.bytecode import Compiler
from tooldock.builder.lock import LockError, Target, uv_env
from tooldock.builder.platforms import wheel_problem


def compile_tree(dest: Path, python: str) -> None:
    """Byte-compile a cached tree so build-time imports (schema extraction) are fast; hash-based pycs keep
    the tree independent of mtimes. Trees whose bytecode goes into the image use `bytecode.Compiler`."""
    subprocess.run(
        [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(dest)],
        capture_output=True,
    )


def install_lock(lock_text: str, dest: Path, target: Target) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    if not lock_text.strip():
        return
    with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="tooldock-install-") as req:
        req.write(lock_text)
        req.flush()
        proc = subprocess.run(
            [
                find_uv_bin(),
                "pip",
                "install",
                "--quiet",
                "--target",
                str(dest),
                "--no-deps",
                "--require-hashes",
                "--link-mode",
                "copy",
                "--python-version",
                target.python,
                "--python-platform",
                target.platform,
                "-r",
                req.name,
                *(["--only-binary", ":all:"] if target.wheels_only else []),
            ],
            capture_output=True,
            text=True,
            env=uv_env(),
        )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-12:])
        no_wheel = wheel_problem(proc.stderr, target.platform, "the lock")
        raise LockError(no_wheel or f"installing the locked packages failed:\n{tail}")
    portable_scripts(dest / "bin")


SCRIPTS = "scripts-env-python3"  # in the trees' cache keys: trees made before portable_scripts are not reused
IMAGE_SHEBANG = b"#!/usr/bin/env python3"  # the image's Python, found on its PATH
_TRAMPOLINE = (b"#!/bin/sh", b"'''exec'", b"' '''")  # uv's form for an interpreter path too long for a shebang


def portable_scripts(bin_dir: Path) -> None:
    """Give the console scripts uv wrote a shebang of the image, not the build host's interpreter.

    uv writes the path of whichever Python it found (a virtualenv's, pyenv's), or a `/bin/sh` trampoline
    naming it when the path is long, so without this a layer's bytes, and the image's digest, depended on
    where the build ran (found by `tooldock verify --rebuild`)."""
    if not bin_dir.is_dir():
        return
    for script in sorted(bin_dir.iterdir()):
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        lines = data.split(b"\n", 3)
        trampoline = len(lines) == 4 and lines[0] == _TRAMPOLINE[0] and lines[2] == _TRAMPOLINE[2]
        if trampoline and lines[1].startswith(_TRAMPOLINE[1]):
            rest = lines[3]
        elif lines[0].startswith(b"#!") and b"python" in lines[0]:
            rest = data.partition(b"\n")[2]
        else:
            continue
        script.write_bytes(IMAGE_SHEBANG + b"\n" + rest)


def filler(
    lock_text: str, target: Target, python: str, image: tuple[Compiler, str] | None = None
) -> Callable[[Path], None]:
    """A `tree` fill: install the locked packages into the directory, then byte-compile them: for the image
    with `image` (the compiler and the tree's directory in the image), else for build-time imports only."""

    def fill(dest: Path) -> None:
        install_lock(lock_text, dest, target)
        if image is not None:
            image[0].compile(dest, image[1])
        else:
            compile_tree(dest, python)

    return fill


def tree(cache: Path, kind: str, key: str, fill: Callable[[Path], None]) -> tuple[Path, bool]:
    """The cached directory for `key`, filled by `fill(tmpdir)` and renamed into place if missing."""
    final = cache / "trees" / f"{kind}-{key[:24]}"
    if final.is_dir():
        return final, True
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        fill(tmp)
        os.replace(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if final.is_dir():  # another build sharing the cache filled the same key first: the same inputs
            return final, True
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final, False
