"""Private files: atomic writes (temp file in the same directory, fsync, rename, fsync the directory),
mode 0600 in a 0700 directory, and the store's lock file."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tooldock.errors import InvalidSecretInput


def private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if stat.S_IMODE(path.stat().st_mode) != 0o700:  # a chmod is an event to whoever watches the folder
        os.chmod(path, 0o700)


def write_private(path: Path, data: bytes, exclusive: bool = False) -> None:
    """Replace `path` with `data` in one step: a reader sees the old file or the new one, never a mix."""
    private_dir(path.parent)
    if exclusive and path.exists():
        raise InvalidSecretInput(f"{path} already exists; refusing to overwrite it")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if exclusive:
            os.link(tmp, path)  # fails if another writer got there first
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """An exclusive lock (flock) on the store for one read-modify-write; other writers wait their turn."""
    private_dir(lock_path.parent)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
