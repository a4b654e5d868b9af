"""`tooldock serve --replicas N` on the process backend: one set of worker processes for all the replicas.

The parent (`replicas.py`) makes a private directory and starts, beside the replicas, a worker owner: this
command again, told by OWNER_ENV to run the workers and serve no port (`runtime/workerowner.py`). Each replica,
told the directory by SHARED_ENV, attaches to the owner's workers instead of starting its own
(`runtime/backends/attached.py`). `TOOLDOCK_REPLICA_WORKERS=own` (undocumented, a way back while this is
young) gives each replica its own workers, as before.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tooldock.runtime.backends.shared import OWNER_ENV, SHARED_ENV

if TYPE_CHECKING:
    from tooldock.runtime.backends.attached import AttachedBackend
    from tooldock.runtime.settings import Settings

OWNER_NAME = "w"  # in the parent's lines: "[w] ..."


def shared_by_default() -> bool:
    return os.environ.get("TOOLDOCK_REPLICA_WORKERS", "shared").strip().lower() != "own"


def make_shared_dir() -> Path:
    """The private directory of the manifest, the owner's control socket and the replicas' `using` files (in
    the temporary directory: a unix socket's path must stay short)."""
    return Path(tempfile.mkdtemp(prefix="tooldock-shared-"))


def remove_shared_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def owner_requested() -> bool:
    return bool(os.environ.get(OWNER_ENV))


def serve_workers(tools_dir: Path, watch: bool | None) -> None:
    """The worker owner: run every namespace's worker for the replicas until SIGTERM."""
    import asyncio

    from tooldock.cli.serve import _secrets
    from tooldock.runtime.settings import Settings, SettingsError
    from tooldock.runtime.workerowner import Owner

    shared = Path(os.environ.pop(SHARED_ENV, ""))
    os.environ.pop(OWNER_ENV, None)
    if not shared.is_dir():
        raise click.ClickException(f"the worker owner's directory {shared} is gone")
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    settings = dataclasses.replace(settings, watch=bool(watch))
    if settings.log_format == "json":
        from tooldock.runtime.logs import use_json_lines

        use_json_lines()
    owner = Owner(tools_dir.resolve(), settings, _secrets(), shared)
    owner.backend.warm_up()
    asyncio.run(owner.run())


def attached(settings: Settings, tools_dir: Path) -> AttachedBackend | None:
    """In a replica of `serve --replicas N`: the backend that attaches to the worker owner's workers (None
    when this process is not such a replica)."""
    shared = os.environ.pop(SHARED_ENV, None)
    if not shared:
        return None
    from tooldock.runtime.backends.attached import AttachedBackend

    return AttachedBackend(settings, tools_dir, Path(shared))
