"""Files replaced in one step: the data goes to a temporary file in the same folder, which is then renamed
over the target, so a reader (or a crash) sees the old file or the new one, never a part of either.
Every writer of a file another program or a later run reads goes through here (the secrets store, which
also links exclusively and syncs its folder, has its own in `secrets.files`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: bytes, mode: int = 0o644, group: int | None = None, durable: bool = False) -> None:
    """Replace `path` with `data`. `mode`: the file's permissions (a temporary file starts at 0600);
    `group`: its group id, when it must differ from the writer's; `durable`: synced to disk before the
    rename (for files a person wrote and would lose on a crash). The folder must exist."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        if group is not None:
            os.chown(tmp, -1, group)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
