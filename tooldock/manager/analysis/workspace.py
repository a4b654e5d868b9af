"""Where analyze_repo keeps its clones: `<root>/<sha256(url)[:24]>/<commit>/`, one per URL and upstream
commit. A clone is made in a temporary directory beside it and renamed into place, so a half clone is never
used; re-analyzing the same commit reuses it (`git ls-remote` tells whether upstream moved), a new commit
gets a new clone and older ones of that URL are removed. `read_file` serves files of the newest clone,
confined to it."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from tooldock.errors import AnalysisError
from tooldock.manager.analysis.git import remote_head, shallow_clone, tree_bytes
from tooldock.manager.analysis.tree import analyze_tree
from tooldock.manager.analysis.urls import RepoUrl, parse_repo_url
from tooldock.manager.analysis.walk import is_binary

CLONE_TIMEOUT = 120.0  # seconds for one git clone (ls-remote gets the same)
MAX_REPO_BYTES = 200 * 1024 * 1024  # a clone's working tree and .git together
MAX_READ_BYTES = 512 * 1024  # read_repo_file
MAX_TOTAL_BYTES = 2048 * 1024 * 1024  # every clone together; the least recently analyzed go first
CURRENT = "current"  # the file naming the commit read_file serves


class RepoWorkspace:
    def __init__(
        self,
        root: Path | str,
        timeout: float = CLONE_TIMEOUT,
        max_bytes: int = MAX_REPO_BYTES,
        max_read_bytes: int = MAX_READ_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
    ) -> None:
        self.root = Path(root)
        self.timeout, self.max_bytes, self.max_read_bytes = timeout, max_bytes, max_read_bytes
        self.max_total_bytes = max_total_bytes
        self._locks: dict[str, asyncio.Lock] = {}
        self._busy: dict[str, int] = {}  # URLs being cloned or analyzed now: never evicted

    async def analyze(self, repo_url: object) -> dict[str, Any]:
        """Seed 000's analyze_repo answer, plus `commit`, `path` (the clone) and `reused`."""
        url = parse_repo_url(repo_url)
        self._busy[url.key] = self._busy.get(url.key, 0) + 1
        try:
            path, commit, reused = await self.clone(url)
            result = await asyncio.to_thread(analyze_tree, path, url.given)
        finally:
            self._busy[url.key] -= 1
            if not self._busy[url.key]:
                del self._busy[url.key]
        result.update({"commit": commit, "path": str(path), "reused": reused})
        if not reused:
            await self._evict()
        return result

    async def _evict(self) -> list[str]:
        """Remove the clones of the least recently analyzed URLs (by their `current` file, rewritten on every
        analyze) until all of them fit in `max_total_bytes`. The choice is made on the event loop, where a URL
        being cloned or analyzed is known and kept; a chosen URL's directory is renamed away there and deleted
        in a thread, so a new analyze of it starts from a fresh clone."""
        sizes = await asyncio.to_thread(self._sizes)
        total = sum(size for _, size in sizes.values())
        gone: list[Path] = []
        removed: list[str] = []
        for name, (_, size) in sorted(sizes.items(), key=lambda item: item[1][0]):
            if total <= self.max_total_bytes:
                break
            if name in self._busy or (name in self._locks and self._locks[name].locked()):
                continue
            trash = self.root / f".trash-{uuid.uuid4().hex}"
            try:
                (self.root / name).rename(trash)
            except OSError:
                continue
            gone.append(trash)
            removed.append(name)
            total -= size
        for trash in gone:
            await asyncio.to_thread(shutil.rmtree, trash, ignore_errors=True)
        return removed

    def _sizes(self) -> dict[str, tuple[float, int]]:
        """Each URL's directory: (when it was last analyzed, its bytes). Left-over trash is removed."""
        found: dict[str, tuple[float, int]] = {}
        for home in self.root.iterdir() if self.root.is_dir() else ():
            if home.name.startswith(".trash-"):
                shutil.rmtree(home, ignore_errors=True)
            elif home.is_dir() and not home.name.startswith("."):
                try:
                    used = (home / CURRENT).stat().st_mtime
                except OSError:
                    used = 0.0
                found[home.name] = (used, tree_bytes(home))
        return found

    async def clone(self, url: RepoUrl) -> tuple[Path, str, bool]:
        """(the clone's directory, its commit, whether an existing clone was reused)."""
        lock = self._locks.setdefault(url.key, asyncio.Lock())
        async with lock:
            home = self.root / url.key
            head = await remote_head(url, self.timeout)
            target = home / head
            if (target / ".git").is_dir():
                self._point(home, head)
                return target, head, True
            home.mkdir(parents=True, exist_ok=True)
            for stale in home.glob(".tmp-*"):  # left by a crash: no clone of this URL runs now
                shutil.rmtree(stale, ignore_errors=True)
            staging = home / f".tmp-{uuid.uuid4().hex}"
            try:
                commit = await shallow_clone(url, staging, self.timeout, self.max_bytes)
                target = home / commit
                if (target / ".git").is_dir():
                    shutil.rmtree(staging, ignore_errors=True)
                else:
                    staging.rename(target)
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
            self._point(home, commit)
            for old in home.iterdir():  # one clone per URL: the newest
                if old.name not in (commit, CURRENT) and not old.name.startswith(".tmp-") and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
            return target, commit, False

    def _point(self, home: Path, commit: str) -> None:
        temp = home / f".{CURRENT}.{uuid.uuid4().hex}"
        temp.write_text(commit + "\n", encoding="utf-8")
        os.replace(temp, home / CURRENT)

    def clone_dir(self, repo_url: object) -> Path:
        """The newest clone of `repo_url`; AnalysisError when it was never analyzed."""
        url = parse_repo_url(repo_url)
        home = self.root / url.key
        try:
            commit = (home / CURRENT).read_text(encoding="utf-8").strip()
        except OSError:
            commit = ""
        target = home / commit
        if not commit or not (target / ".git").is_dir():
            raise AnalysisError(
                f"{url.given} has not been analyzed (or its clone was removed to make room for newer ones); "
                "call analyze_repo with this repo_url first"
            )
        return target

    def read_file(self, repo_url: object, path: object) -> dict[str, str]:
        """`{"path", "content"}` of a text file of the clone. Refused: absolute paths, `..`, `.git`, any
        symbolic link on the way, non-files, binaries (a NUL byte) and files over `max_read_bytes`."""
        root = self.clone_dir(repo_url)
        target, shown, info = inside(root, path, "path", "a file path inside the repository, e.g. 'src/index.ts'")
        if not stat.S_ISREG(info.st_mode):
            raise AnalysisError(f"{shown} is not a regular file (a directory?); pick one from 'files'")
        if info.st_size > self.max_read_bytes:
            raise AnalysisError(
                f"{shown} is {info.st_size} bytes, over the {self.max_read_bytes}-byte limit of read_repo_file"
            )
        with target.open("rb") as fh:
            data = fh.read(self.max_read_bytes + 1)
        if is_binary(data) or len(data) > self.max_read_bytes:
            raise AnalysisError(f"{shown} is a binary file (or grew past the limit); only text is served")
        return {"path": shown, "content": data.decode("utf-8", errors="replace")}


def inside(root: Path, path: object, name: str, example: str) -> tuple[Path, str, os.stat_result]:
    """`path` (relative, `/`-separated) inside the clone at `root`: the target, its normalized text and its
    lstat. Refused: absolute paths, `..`, `.git`, any symbolic link on the way and anything not there."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise AnalysisError(f"{name} must be {example}")
    rel = PurePosixPath(path.strip().replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts:
        raise AnalysisError(f"{name} {path!r} must be relative to the repository and stay inside it (no '..')")
    parts = [p for p in rel.parts if p not in ("", ".")]
    shown = "/".join(parts)
    if not parts or parts[0] == ".git":
        raise AnalysisError(f"{name} {path!r} is not a file or folder of the repository")
    target, info = root, root.lstat()
    for part in parts:
        target = target / part
        try:
            info = target.lstat()
        except OSError:
            raise AnalysisError(f"{shown} is not in the repository; analyze_repo lists its files") from None
        if stat.S_ISLNK(info.st_mode):
            raise AnalysisError(f"{shown} is (or is inside) a symbolic link, which is never followed")
    if not target.resolve().is_relative_to(root.resolve()):
        raise AnalysisError(f"{shown} resolves outside the repository")
    return target, shown, info
