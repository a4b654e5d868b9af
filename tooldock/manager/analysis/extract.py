"""Unpacking archives nobody vetted (npm tarballs, sdists, wheels): only regular files and directories are
written, never links, devices or FIFOs (they are counted and skipped); a member with an absolute path, a `..`
component or a drive letter refuses the whole archive; the total written and the number of files are capped
(bytes are counted as written, so a compression bomb stops at the cap). Files get mode 0644, directories 0755;
nothing in the archive is ever run."""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from tooldock.errors import AnalysisError

MAX_EXTRACTED_BYTES = 200 * 1024 * 1024
MAX_MEMBERS = 20000
CHUNK = 1024 * 1024


@dataclass
class Extracted:
    files: int = 0
    bytes: int = 0
    skipped_links: int = 0


def member_path(name: str, what: str) -> PurePosixPath | None:
    """The relative path a member is written to; None for the archive's root entry. Refuses escapes."""
    clean = name.replace("\\", "/")
    path = PurePosixPath(clean)
    if clean.startswith("/") or (len(clean) > 1 and clean[1] == ":") or ".." in path.parts or "\0" in clean:
        raise AnalysisError(f"{what} holds an unsafe path {name[:200]!r} (absolute or with '..'); refused whole")
    parts = [p for p in path.parts if p not in ("", ".")]
    return PurePosixPath(*parts) if parts else None


class _Writer:
    def __init__(self, dest: Path, what: str, max_bytes: int, max_members: int) -> None:
        self.dest, self.what, self.max_bytes, self.max_members = dest, what, max_bytes, max_members
        self.stats = Extracted()

    def _count(self) -> None:
        if self.stats.files + self.stats.skipped_links >= self.max_members:
            raise AnalysisError(f"{self.what} has more than {self.max_members} entries; refused")

    def directory(self, rel: PurePosixPath) -> None:
        self._count()
        (self.dest / rel).mkdir(mode=0o755, parents=True, exist_ok=True)

    def file(self, rel: PurePosixPath, source: IO[bytes]) -> None:
        self._count()
        target = self.dest / rel
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if target.is_symlink() or target.is_dir():
            raise AnalysisError(f"{self.what} writes {rel} twice, as a file and as something else; refused")
        with target.open("wb") as out:
            while chunk := source.read(CHUNK):
                self.stats.bytes += len(chunk)
                if self.stats.bytes > self.max_bytes:
                    raise AnalysisError(
                        f"{self.what} unpacks to more than {self.max_bytes // (1024 * 1024)} MB; refused"
                    )
                out.write(chunk)
        target.chmod(0o644)
        self.stats.files += 1

    def skip_link(self) -> None:
        self._count()
        self.stats.skipped_links += 1


def _tar_members(archive: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (member := archive.next()) is not None:
        yield member


def extract(
    archive: Path,
    dest: Path,
    what: str,
    max_bytes: int = MAX_EXTRACTED_BYTES,
    max_members: int = MAX_MEMBERS,
) -> Extracted:
    """Unpack a .tgz / .tar.gz / .tar.bz2 / .zip / .whl into dest (created; removed again on any failure)."""
    dest.mkdir(parents=True, exist_ok=False)
    writer = _Writer(dest, what, max_bytes, max_members)
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for info in zf.infolist():
                    rel = member_path(info.filename, what)
                    mode = (info.external_attr >> 16) & 0o170000
                    if rel is None:
                        continue
                    if mode == 0o120000:  # a symbolic link stored in the zip
                        writer.skip_link()
                    elif info.is_dir():
                        writer.directory(rel)
                    else:
                        with zf.open(info) as source:
                            writer.file(rel, source)
        else:
            with tarfile.open(archive, mode="r:*") as tf:
                for member in _tar_members(tf):
                    rel = member_path(member.name, what)
                    if rel is None:
                        continue
                    if member.isdir():
                        writer.directory(rel)
                    elif member.isreg():
                        stream = tf.extractfile(member)
                        if stream is not None:
                            writer.file(rel, stream)
                    else:  # symlinks, hard links, devices, FIFOs
                        writer.skip_link()
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise AnalysisError(f"{what} is not a readable archive: {exc}") from None
    except AnalysisError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return writer.stats


def single_root(dest: Path) -> Path:
    """`package/` of an npm tarball, `name-1.0/` of an sdist: the one top directory, else dest itself."""
    entries = [p for p in dest.iterdir()]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return dest
