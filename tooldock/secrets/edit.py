"""`tooldock secrets edit`: the seed's safe editing flow.

Lock the store (other writers wait), decrypt to a 0600 file on tmpfs (`/dev/shm` when it is there and
writable, else the temp directory), run `$VISUAL` or `$EDITOR` (default `vi`; split like a shell would),
validate, re-encrypt under the same data key, replace atomically. The plaintext is overwritten with zeros
and deleted whatever happens: the editor failing, the result being invalid, or an interrupt.

An invalid edit (not YAML, another shape than `global:` / `namespaces:`, a bad key or namespace name, a
value that is not a non-empty string) changes nothing and raises `EditFailed` naming the place, never a
value. An unchanged file writes nothing. The metadata follows the values: every key in the edited file
is `set`; a key deleted in the editor loses its status, except a placeholder, which stays one until a
value arrives (it never had a value to delete).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from tooldock.errors import EditFailed
from tooldock.secrets import yamlfile
from tooldock.secrets.files import locked
from tooldock.secrets.store import SecretStore
from tooldock.secrets.validate import edited_tree

HEADER = (
    "# ToolDock secrets: edit values below; save and quit to re-encrypt, or quit without saving to keep them.\n"
    "# Layout: global: {KEY: value} and namespaces: {namespace: {KEY: value}}. This file is deleted afterwards.\n"
)


def _scratch_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _shred(path: Path) -> None:
    """Overwrite with zeros, sync, delete (the editor may have replaced the file: the path is what counts)."""
    with contextlib.suppress(FileNotFoundError):
        size = path.stat().st_size
        with open(path, "r+b") as out:
            out.write(b"\0" * size)
            out.flush()
            os.fsync(out.fileno())
        path.unlink()


def _editor_command(editor: str | None) -> list[str]:
    text = editor or os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        command = shlex.split(text)
    except ValueError as exc:
        raise EditFailed(f"the editor command {text!r} cannot be split: {exc}") from None
    if not command:
        raise EditFailed("the editor command is empty: set EDITOR")
    return command


def edit(store: SecretStore, editor: str | None = None) -> dict[str, int]:
    """Run the editor over the decrypted values; returns how many values the store holds afterwards and
    whether anything changed ({"global", "namespaces", "changed"})."""
    if not store.exists():
        raise EditFailed(f"there is no secrets store at {store.directory}: run `tooldock secrets init` first")
    command = _editor_command(editor)
    with locked(store.lock):
        current = store.load_all()
        fd, name = tempfile.mkstemp(prefix="tooldock-secrets-", suffix=".yaml", dir=_scratch_dir())
        path = Path(name)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(HEADER.encode() + yamlfile.dump(current))
            try:
                finished = subprocess.run([*command, str(path)])
            except OSError as exc:
                raise EditFailed(f"could not run the editor {command[0]!r}: {exc.strerror}") from None
            if finished.returncode != 0:
                raise EditFailed(f"the editor exited with {finished.returncode}; the store is unchanged")
            try:
                edited = yamlfile.load(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                raise EditFailed("the edited file cannot be read back as UTF-8 text; the store is unchanged") from None
            except (ValueError, yamlfile.YAMLError) as exc:
                mark = getattr(exc, "problem_mark", None)
                line = f" at line {mark.line + 1}" if mark is not None else ""
                raise EditFailed(f"the edited file is not valid YAML{line}; the store is unchanged") from None
            tree = edited_tree(edited)
            changed = tree != current
            if changed:
                store.replace(tree)
        finally:
            _shred(path)
    return {
        "global": len(tree["global"]),
        "namespaces": sum(len(v) for v in tree["namespaces"].values()),
        "changed": int(changed),
    }
