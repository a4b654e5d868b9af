"""`tooldock secrets edit`: the seed's safe editing flow.

Lock the store, decrypt to a 0600 file on tmpfs (`/dev/shm` when it is there, else the temp directory),
run `$EDITOR` (default `vi`), validate, re-encrypt, replace atomically; the plaintext is overwritten with
zeros and deleted whatever happens, the editor failing or the result being invalid included.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tooldock.errors import EditFailed, InvalidSecretInput
from tooldock.secrets.files import locked
from tooldock.secrets.store import SecretStore, check_key, check_namespace, check_value, dump_yaml

HEADER = (
    "# ToolDock secrets: edit values below; save and quit to re-encrypt, or quit without saving to keep them.\n"
    "# Layout: global: {KEY: value} and namespaces: {namespace: {KEY: value}}. This file is deleted afterwards.\n"
)


def _scratch_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def validate(data: Any) -> dict[str, Any]:
    """The edited tree in the store's shape, or EditFailed naming what is wrong (never a value)."""
    if data is None:
        data = {}
    if not isinstance(data, dict) or set(data) - {"global", "namespaces"}:
        raise EditFailed("the file must be a mapping with only `global:` and `namespaces:`")
    tree: dict[str, Any] = {"global": {}, "namespaces": {}}
    try:
        for key, value in (data.get("global") or {}).items():
            tree["global"][check_key(str(key))] = check_value(_text(value, f"global.{key}"))
        for namespace, entries in (data.get("namespaces") or {}).items():
            check_namespace(str(namespace))
            if not isinstance(entries, dict):
                raise EditFailed(f"namespaces.{namespace} must be a mapping of KEY: value")
            tree["namespaces"][str(namespace)] = {
                check_key(str(k)): check_value(_text(v, f"namespaces.{namespace}.{k}")) for k, v in entries.items()
            }
    except (InvalidSecretInput, AttributeError) as exc:
        raise EditFailed(f"invalid edit: {exc}") from None
    return tree


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise EditFailed(f"{where} must be a string (quote it)")
    return value


def _shred(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        size = path.stat().st_size
        with open(path, "r+b") as out:
            out.write(b"\0" * size)
            out.flush()
            os.fsync(out.fileno())
        path.unlink()


def edit(store: SecretStore, editor: str | None = None) -> dict[str, int]:
    """Run the editor over the decrypted values; returns how many values the store holds afterwards."""
    if not store.exists():
        raise EditFailed(f"there is no secrets store at {store.directory}: run `tooldock secrets init` first")
    command = shlex.split(editor or os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
    with locked(store.lock):
        current = store.load_all()
        fd, name = tempfile.mkstemp(prefix="tooldock-secrets-", suffix=".yaml", dir=_scratch_dir())
        path = Path(name)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(HEADER.encode() + dump_yaml(current))
            try:
                finished = subprocess.run([*command, str(path)])
            except OSError as exc:
                raise EditFailed(f"could not run the editor {command[0]!r}: {exc.strerror}") from None
            if finished.returncode != 0:
                raise EditFailed(f"the editor exited with {finished.returncode}; the store is unchanged")
            try:
                edited = yaml.safe_load(path.read_text())
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                line = f" at line {mark.line + 1}" if mark is not None else ""
                raise EditFailed(f"the edited file is not valid YAML{line}; the store is unchanged") from None
            tree = validate(edited)
            store.replace(tree)
        finally:
            _shred(path)
    return {"global": len(tree["global"]), "namespaces": sum(len(v) for v in tree["namespaces"].values())}
