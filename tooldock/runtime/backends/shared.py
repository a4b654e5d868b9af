"""Process workers shared by the replicas of `tooldock serve --replicas N`: what the worker owner and the
replicas that attach to its workers agree on.

The owner (`runtime/workerowner.py`, a child of `serve` beside the replicas) runs the process workers; each
replica reaches them on their unix sockets (`backends/attached.py`). They meet in one private directory (0700,
made by `serve`, named to both by SHARED_ENV):

- `workers.json`, the manifest, written by the owner (atomically) whenever its snapshot or a worker's status
  changes: each namespace's folder as scanned (the `NamespaceSource`, so a replica applies the same limits
  and config), the socket of the worker that serves it now (None: nothing to run), its status (state, pid,
  restarts, last error) and the reload error of a newer version that failed; the scan's problems. A replica
  polls it: a namespace whose socket or folder changed is swapped to the new worker as a reload swaps one.
- `owner.sock`, the owner's control socket, one JSON line each way: `reload` (a replica's SIGHUP, `POST
  /reload`, the manager's `reload_core`: the owner reloads and answers its result once the manifest is
  written) and `stuck` (a replica saw a worker keep running a call its caller gave up on: the owner
  replaces it).
- `using/<pid>`, per replica, the sockets of the workers it may still call (those it serves and those it
  drains): the owner stops a replaced worker only once no live replica lists it, so no call is dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from tooldock.atomic import atomic_write
from tooldock.namespace.models import Limits, NamespaceConfig, NamespaceSource, Problem, ToolFile

SHARED_ENV = "_TOOLDOCK_SHARED_WORKERS"  # parent -> owner and replicas only; never documented
OWNER_ENV = "_TOOLDOCK_WORKER_OWNER"  # parent -> the owner only
MANIFEST, CONTROL, USING = "workers.json", "owner.sock", "using"
POLL = 0.2  # seconds between a replica's looks at the manifest, and the owner's at its workers' status


def source_to_json(source: NamespaceSource) -> dict[str, Any]:
    return {
        "name": source.name,
        "path": str(source.path),
        "files": [[f.filename, list(f.tools), list(f.lines)] for f in source.files],
        "problems": [p.to_dict() for p in source.problems],
        "config": dataclasses.asdict(source.config),
        "requirements": source.requirements,
        "fingerprint": source.fingerprint,
    }


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def source_from_json(data: dict[str, Any]) -> NamespaceSource:
    config = dict(data["config"])
    limits = Limits(**config.pop("limits"))
    return NamespaceSource(
        name=data["name"],
        path=Path(data["path"]),
        files=tuple(ToolFile(f[0], tuple(f[1]), tuple(f[2])) for f in data["files"]),
        problems=tuple(problem_from_json(p) for p in data["problems"]),
        config=NamespaceConfig(limits=limits, **{k: _tuples(v) for k, v in config.items()}),
        requirements=data["requirements"],
        fingerprint=data["fingerprint"],
    )


def problem_from_json(data: dict[str, Any]) -> Problem:
    return Problem(str(data["file"]), str(data["message"]), data.get("line"), str(data.get("code") or "invalid_file"))


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    atomic_write(folder / MANIFEST, json.dumps(manifest, sort_keys=True).encode(), mode=0o600)


def layout(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a replica swaps workers for: each namespace's socket and folder fingerprint (not the statuses)."""
    return {n: (e.get("socket"), e["source"]["fingerprint"]) for n, e in (manifest.get("namespaces") or {}).items()}


def write_using(folder: Path, sockets: set[str]) -> None:
    """This replica's `using/<pid>`: the workers it may still call."""
    (folder / USING).mkdir(mode=0o700, exist_ok=True)
    atomic_write(folder / USING / str(os.getpid()), json.dumps(sorted(sockets)).encode(), mode=0o600)


def used_by_replicas(folder: Path, socket: str) -> bool:
    """Whether a live replica may still call the worker on `socket` (a dead one's file is ignored)."""
    try:
        listed = list((folder / USING).iterdir())
    except OSError:
        return False
    for path in listed:
        try:
            pid = int(path.name)
            os.kill(pid, 0)
            if socket in json.loads(path.read_bytes()):
                return True
        except (ValueError, OSError):  # a temporary file, a replica that died: not a user
            continue
    return False


async def ask_owner(folder: Path, message: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One request on the owner's control socket; raises OSError (with the reason) when it cannot answer."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_unix_connection(str(folder / CONTROL), limit=2**24)
            try:
                writer.write(json.dumps(message).encode() + b"\n")
                await writer.drain()
                line = await reader.readline()
            finally:
                writer.close()
    except TimeoutError:
        raise OSError(f"the worker owner did not answer within {timeout:g}s") from None
    except OSError as exc:
        raise OSError(f"the worker owner is not reachable ({exc.strerror or exc}); is it restarting?") from None
    try:
        answer = json.loads(line)
    except ValueError:
        raise OSError("the worker owner closed the connection without an answer") from None
    if not answer.get("ok"):
        raise OSError(str(answer.get("error") or "the worker owner refused the request"))
    return dict(answer.get("result") or {})
