"""Reproducible layer tarballs: same files in, same bytes out, whatever the mtimes or the build directory.

Entries are sorted, owned by 0:0 with no user/group names, stamped with one fixed mtime, and normalised
to mode 0755 (directories, executables) or 0644; gzip carries no name and mtime 0.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

SKIP_NAMES = frozenset({"__pycache__", ".git", ".DS_Store"})


def source_date_epoch() -> int:
    raw = os.environ.get("SOURCE_DATE_EPOCH", "")
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"SOURCE_DATE_EPOCH={raw!r} is not a number of seconds") from None


def iso_time(epoch: int) -> str:
    """The image's `created` timestamps: the same epoch as the layers' mtimes."""
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Entry:
    """One file, directory or symlink in a layer. `data` for files, `target` for symlinks."""

    path: str  # absolute path inside the image, e.g. "/app/hello.py"
    data: bytes | None = None
    source: Path | None = None
    mode: int = 0o644
    target: str | None = None
    is_dir: bool = False
    owner: int = 0  # uid and gid; everything is root's unless a recipe says otherwise

    def content(self) -> bytes:
        """A file entry's bytes: given, or read from its source."""
        if self.data is not None:
            return self.data
        if self.source is None:
            raise ValueError(f"{self.path}: a file entry needs data or a source")
        return self.source.read_bytes()


@dataclass(frozen=True)
class Layer:
    digest: str  # sha256 of the compressed blob
    diff_id: str  # sha256 of the uncompressed tar
    size: int
    media_type: str = "application/vnd.oci.image.layer.v1.tar+gzip"


def entries_from_dir(
    root: Path, prefix: str, skip: Callable[[str], bool] = lambda rel: False, bytecode: bool = False
) -> list[Entry]:
    """Every file, directory and symlink under `root`, placed under `prefix` in the image. Bytecode only with
    `bytecode` (trees ToolDock compiled reproducibly, install.compile_tree), never from a user's folder."""
    entries = []
    skipped = SKIP_NAMES - {"__pycache__"} if bytecode else SKIP_NAMES
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in skipped and not skip(os.path.relpath(os.path.join(dirpath, d), root))
        )
        base = Path(dirpath)
        rel_dir = base.relative_to(root).as_posix()
        if rel_dir != ".":
            entries.append(Entry(f"{prefix}/{rel_dir}", is_dir=True, mode=0o755))
        for name in sorted(filenames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if name in skipped or (name.endswith(".pyc") and not bytecode) or skip(rel):
                continue
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                entries.append(Entry(f"{prefix}/{rel}", target=os.readlink(path)))
            elif stat.S_ISREG(info.st_mode):
                mode = 0o755 if info.st_mode & 0o111 else 0o644
                entries.append(Entry(f"{prefix}/{rel}", source=path, mode=mode))
    return entries


def write_entries(entries: Iterable[Entry], strip: str, dest: Path) -> None:
    """Put entries on disk under `dest` (their image path minus `strip`): for build contexts and the trees
    schema extraction imports. The inverse of `entries_from_dir`."""
    for entry in entries:
        target = dest / entry.path.removeprefix(strip + "/")
        if entry.is_dir:
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if entry.target is not None:
            target.symlink_to(entry.target)
        else:
            target.write_bytes(entry.content())


def _parents(entries: Iterable[Entry]) -> list[Entry]:
    """Directory entries for every parent, so extraction never depends on implicit directories."""
    have = {e.path for e in entries if e.is_dir}
    need = set()
    for e in entries:
        for parent in PurePosixPath(e.path).parents:
            if str(parent) != "/" and str(parent) not in have:
                need.add(str(parent))
    return [Entry(p, is_dir=True, mode=0o755) for p in need]


def write_layer(entries: list[Entry], out: BinaryIO, mtime: int | None = None) -> tuple[str, str, int]:
    """Write a gzip tar of `entries` to `out`; return (digest, diff_id, size) as "sha256:..." strings."""
    mtime = source_date_epoch() if mtime is None else mtime
    everything = sorted([*entries, *_parents(entries)], key=lambda e: e.path)
    raw_hash = hashlib.sha256()
    gz_hash = hashlib.sha256()
    size = 0

    class Hashing(io.RawIOBase):
        def write(self, b: Any) -> int:  # Any: io's own signature takes any buffer
            nonlocal size
            gz_hash.update(b)
            size += len(b)
            out.write(b)
            return len(b)

        def writable(self) -> bool:
            return True

    sink = Hashing()
    with gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=6) as gz:

        class Tee(io.RawIOBase):
            def write(self, b: Any) -> int:  # Any: io's own signature takes any buffer
                raw_hash.update(b)
                gz.write(b)
                return len(b)

            def writable(self) -> bool:
                return True

        with tarfile.open(fileobj=Tee(), mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for e in everything:
                info = tarfile.TarInfo(e.path.lstrip("/"))
                info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, e.owner, e.owner, "", ""
                info.mode = e.mode
                if e.is_dir:
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif e.target is not None:
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, e.target, 0o777
                    tar.addfile(info)
                else:
                    data = e.content()
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return f"sha256:{gz_hash.hexdigest()}", f"sha256:{raw_hash.hexdigest()}", size
