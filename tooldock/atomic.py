"""Files replaced in one step: the data goes to a temporary file in the same folder, which is then renamed
over the target, so a reader (or a crash) sees the old file or the new one, never a part of either.
Every writer of a file another program or a later run reads goes through here (the secrets store, which
also links exclusively and syncs its folder, has its own in `secrets.files`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


class Staged:
    """A temporary file in the target's folder, written through `file`, then put in place by `commit`."""

    def __init__(self, folder: Path, name: str) -> None:
        fd, self.tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        try:
            self.file: BinaryIO = os.fdopen(fd, "wb")
        except BaseException:  # the descriptor and the empty file would outlive the failure
            os.close(fd)
            os.unlink(self.tmp)
            raise
        self.committed = False

    def commit(self, path: Path, mode: int = 0o644, group: int | None = None, durable: bool = False) -> None:
        """Rename the written data over `path` (in the same folder). `mode`: the file's permissions (a
        temporary file starts at 0600); `group`: its group id, when it must differ from the writer's;
        `durable`: synced to disk before the rename (for files a person wrote and would lose on a crash)."""
        if durable:
            self.file.flush()
            os.fsync(self.file.fileno())
        self.file.close()
        if group is not None:
            os.chown(self.tmp, -1, group)
        os.chmod(self.tmp, mode)
        os.replace(self.tmp, path)
        self.committed = True


@contextlib.contextmanager
def staged(folder: Path, name: str) -> Iterator[Staged]:
    """A file written in steps (for data too large to hold, or whose name is known only once written):
    `with staged(folder, name) as out: write to out.file; out.commit(path)`. Left uncommitted, by an error
    or not, the temporary file is removed. The folder must exist."""
    out = Staged(folder, name)
    try:
        yield out
    finally:
        if not out.committed:
            out.file.close()
            with contextlib.suppress(OSError):
                os.unlink(out.tmp)


def atomic_write(path: Path, data: bytes, mode: int = 0o644, group: int | None = None, durable: bool = False) -> None:
    """Replace `path` with `data`, with `Staged.commit`'s `mode`, `group` and `durable`. The folder must
    exist."""
    with staged(path.parent, path.name) as out:
        out.file.write(data)
        out.commit(path, mode, group, durable)
