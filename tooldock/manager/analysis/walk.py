"""Which files of a tree the analysis reads: regular files only (never a symbolic link, so nothing outside the
tree is ever opened), no binaries, nothing over the size limit, no dependency or build folders, at most
`max_files` of them. What was left out is reported, bounded, with the reason."""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_BYTES = 1024 * 1024  # a source file larger than this is skipped (bundles, generated code, data)
MAX_FILES = 5000  # files looked at per tree
MAX_LISTED = 500  # `files` and `skipped` entries in the answer

LANGUAGES = {
    ".ts": "typescript",
    ".tsx": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".py": "python",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
}
MANIFESTS = {
    "package.json": "javascript",
    "tsconfig.json": "typescript",
    "pyproject.toml": "python",
    "setup.py": "python",
    "requirements.txt": "python",
    "go.mod": "go",
    "Cargo.toml": "rust",
}
# Dependency, cache and VCS folders are never read; build output only when the tree also has sources.
ALWAYS_SKIPPED = {
    ".git",
    ".hg",
    "node_modules",
    "vendor",
    "__pycache__",
    ".venv",
    "venv",
    "site-packages",
    ".tox",
    ".mypy_cache",
}
BUILD_DIRS = {"dist", "build", "out", "lib"}
TEST_DIRS = {"test", "tests", "__tests__", "testdata", "spec", "e2e", "fixtures", "__mocks__"}


@dataclass
class SourceFile:
    rel: str  # POSIX path relative to the tree
    path: Path
    language: str
    size: int

    @property
    def is_test(self) -> bool:
        parts = self.rel.split("/")
        name = parts[-1]
        return (
            any(p in TEST_DIRS for p in parts[:-1])
            or name.startswith("test_")
            or name.endswith(("_test.py", "_test.go", "conftest.py"))
            or any(marker in name for marker in (".test.", ".spec."))
        )


@dataclass
class Tree:
    root: Path
    sources: list[SourceFile] = field(default_factory=list)
    manifests: dict[str, Path] = field(default_factory=dict)  # rel path -> path (package.json, go.mod, ...)
    skipped: list[dict[str, str]] = field(default_factory=list)
    skipped_count: int = 0
    truncated: bool = False

    def skip(self, rel: str, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_LISTED:
            self.skipped.append({"path": rel, "reason": reason})

    def language(self) -> str:
        counts = Counter(f.language for f in self.sources if not f.is_test)
        if not counts:
            counts = Counter(f.language for f in self.sources)
        if counts:
            return counts.most_common(1)[0][0]
        named = [MANIFESTS[Path(rel).name] for rel in self.manifests if Path(rel).name in MANIFESTS]
        return named[0] if named else "unknown"


def is_binary(head: bytes) -> bool:
    return b"\0" in head


def _has_sources(root: Path) -> bool:
    return any((root / name).is_dir() for name in ("src", "source", "pkg", "cmd", "internal"))


def _entries(root: Path, top: Path, skip_build: bool, tree: Tree) -> Iterator[tuple[str, os.stat_result]]:
    """(rel, lstat) for each entry under top, sorted, directories descended without following links."""
    try:
        names = sorted(os.listdir(top))
    except OSError as exc:
        tree.skip(top.relative_to(root).as_posix() or ".", f"unreadable: {exc.strerror}")
        return
    for name in names:
        path = top / name
        rel = path.relative_to(root).as_posix()
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            if name in ALWAYS_SKIPPED or (skip_build and top == root and name in BUILD_DIRS):
                continue
            yield from _entries(root, path, skip_build, tree)
        else:
            yield rel, info


def walk(root: Path, max_files: int = MAX_FILES, max_bytes: int = MAX_FILE_BYTES) -> Tree:
    root = Path(root)
    tree = Tree(root)
    seen = 0
    for rel, info in _entries(root, root, _has_sources(root), tree):
        if stat.S_ISLNK(info.st_mode):
            tree.skip(rel, "symbolic link (never followed)")
            continue
        if not stat.S_ISREG(info.st_mode):
            tree.skip(rel, "not a regular file")
            continue
        name = rel.rsplit("/", 1)[-1]
        language = LANGUAGES.get(Path(name).suffix.lower())
        requirements = name.startswith("requirements") and name.endswith(".txt")
        if language is None and name not in MANIFESTS and not requirements:
            continue
        seen += 1
        if seen > max_files:
            tree.truncated = True
            break
        if info.st_size > max_bytes:
            tree.skip(rel, f"larger than {max_bytes} bytes")
            continue
        path = root / rel
        try:
            with path.open("rb") as fh:
                head = fh.read(8192)
        except OSError as exc:
            tree.skip(rel, f"unreadable: {exc.strerror}")
            continue
        if is_binary(head):
            tree.skip(rel, "binary")
            continue
        if language is None:
            tree.manifests[rel] = path
        else:
            if name in MANIFESTS:
                tree.manifests[rel] = path
            tree.sources.append(SourceFile(rel, path, language, info.st_size))
    return tree


def read_text(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """The file's text (UTF-8, undecodable bytes replaced), or None when it is a link, too big or binary."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return None if is_binary(data[:8192]) else data.decode("utf-8", errors="replace")
