"""The tools directory as the manager may touch it: every path an LLM names is checked here, once.

A namespace is a direct sub-folder with a valid name (`_system` reserved); a tool file is a plain `name.py`
directly inside it. Nothing is followed out of the tools directory: a namespace folder or file that is a
symlink, or that resolves outside its parent, is refused rather than read, written or deleted. Writes go to
a temporary file in the same folder and are renamed into place, so a reader (the gateway, the watcher)
never sees half a file, and a failed write leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from tooldock.atomic import atomic_write as write_file
from tooldock.errors import InvalidInput, Missing
from tooldock.namespace.names import NamespaceNameError, validate_filename, validate_namespace_name
from tooldock.namespace.toolsfile import TOOLS_FILE

MAX_CODE_BYTES = 256 * 1024  # one tool file; the scanner reads up to 1 MB, an LLM never needs that much
MAX_REQUIREMENT_LINES = 200


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _checked(self, path: Path, what: str) -> Path:
        """`path` itself must not be a symlink and must resolve directly under its parent inside root."""
        if path.is_symlink():
            raise InvalidInput(f"{what} is a symbolic link; the manager only works on real files and folders")
        try:
            path.resolve().relative_to(self.root)
        except ValueError:
            raise InvalidInput(f"{what} resolves outside the tools directory; refused") from None
        return path

    def namespace_name(self, name: object) -> str:
        if not isinstance(name, str):
            raise InvalidInput("namespace must be a string, e.g. 'github'")
        try:
            return validate_namespace_name(name)
        except NamespaceNameError as exc:
            raise InvalidInput(str(exc), {"namespace": name}) from None

    def namespace_dir(self, name: object, must_exist: bool = True) -> Path:
        folder = self.root / self.namespace_name(name)
        self._checked(folder, f"namespace folder {folder.name!r}")
        if must_exist and not folder.is_dir():
            available = ", ".join(self.namespaces()) or "none"
            raise Missing(
                f"namespace {folder.name!r} does not exist (available: {available}); "
                "create it with create_namespace first",
                {"namespace": folder.name},
            )
        return folder

    def tool_file(self, namespace: object, filename: object) -> Path:
        folder = self.namespace_dir(namespace)
        if not isinstance(filename, str):
            raise InvalidInput("filename must be a string, e.g. 'issues.py'")
        try:
            validate_filename(filename)
        except NamespaceNameError as exc:
            raise InvalidInput(str(exc), {"filename": filename}) from None
        return self._checked(folder / filename, f"{folder.name}/{filename}")

    def serves_upstream(self, namespace: object) -> bool:
        """Whether the (existing) namespace serves upstream MCP servers: it has a tools.toml."""
        return (self.namespace_dir(namespace) / TOOLS_FILE).is_file()

    def refuse_upstream(self, namespace: object, what: str) -> None:
        """A namespace with a tools.toml serves upstream MCP servers: tool files and requirements there are
        never loaded, and a .py file blocks its reloads. `what` is what the caller was about to do."""
        folder = self.namespace_dir(namespace)
        if self.serves_upstream(folder.name):
            raise InvalidInput(
                f"namespace {folder.name!r} serves upstream MCP servers (its tools.toml), so {what} would not be "
                "used: a namespace serves tool files or upstream servers, not both. Create another namespace "
                "for tool files (create_namespace)",
                {"namespace": folder.name},
            )

    def metadata_file(self, namespace: object, name: str) -> Path:
        """`requirements.txt` or `tooldock.yaml` of an existing namespace."""
        folder = self.namespace_dir(namespace)
        return self._checked(folder / name, f"{folder.name}/{name}")

    def namespaces(self) -> list[str]:
        if not self.root.is_dir():
            return []
        names = []
        for child in sorted(self.root.iterdir()):
            if child.is_dir() and not child.is_symlink() and not child.name.startswith((".", "_")):
                with contextlib.suppress(NamespaceNameError):
                    names.append(validate_namespace_name(child.name))
        return names

    def tool_files(self, namespace: object) -> list[Path]:
        folder = self.namespace_dir(namespace)
        return [
            p
            for p in sorted(folder.glob("*.py"))
            if not p.name.startswith((".", "_")) and p.is_file() and not p.is_symlink()
        ]


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` in one step, synced to disk first (an LLM's or a person's work)."""
    write_file(path, data, durable=True)


def decode_code(code: object, what: str = "code") -> str:
    """The source an LLM sent: a string, within the size limit, encodable as UTF-8 (no lone surrogates)."""
    if not isinstance(code, str):
        raise InvalidInput(f"{what} must be a string with the complete Python source of the file")
    try:
        size = len(code.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{what} is not valid UTF-8 text ({exc.reason} at character {exc.start}); "
            "rewrite it as UTF-8 text without lone surrogates"
        ) from None
    if size > MAX_CODE_BYTES:
        raise InvalidInput(
            f"{what} is {size} bytes; a tool file may be at most {MAX_CODE_BYTES} bytes. "
            "Split the tools over several files."
        )
    return code
