"""Running git on repositories nobody vetted: never a prompt (`GIT_TERMINAL_PROMPT=0`, ssh in batch mode),
no hooks (`core.hooksPath=/dev/null`), no remote-helper transports (`protocol.ext.allow=never`), `file://`
only when asked for, no LFS downloads; a time limit and, for clones, a size limit on the directory being
written (git and its children are killed as a process group when either is exceeded)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

from tooldock.errors import AnalysisError, FetchFailed
from tooldock.manager.analysis.urls import RepoUrl

POLL_SECONDS = 0.2


def mb(size: int) -> str:
    return f"{size / (1024 * 1024):.3g} MB"


def git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_LFS_SKIP_SMUDGE": "1",
            "GIT_SSH_COMMAND": env.get("GIT_SSH_COMMAND") or "ssh -o BatchMode=yes",
            "LC_ALL": "C",
        }
    )
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    return env


def git_args(url: RepoUrl) -> list[str]:
    allow = "always" if url.local else "never"
    return [
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        f"protocol.file.allow={allow}",
        "-c",
        "protocol.ext.allow=never",
        "-c",
        "core.fsmonitor=false",
    ]


def tree_bytes(path: Path) -> int:
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_size
    return total


def _last_lines(stderr: bytes) -> str:
    lines = [line.strip() for line in stderr.decode("utf-8", errors="replace").splitlines() if line.strip()]
    return " / ".join(lines[-3:])[:500] or "no message"


async def run_git(
    args: list[str], url: RepoUrl, timeout: float, watch: Path | None = None, max_bytes: int = 0, what: str = "git"
) -> bytes:
    """Run `git <args>`; returns stdout. Raises FetchFailed when git fails, AnalysisError when a limit is hit."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *git_args(url),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=git_env(),
            start_new_session=True,
        )
    except OSError as exc:
        raise AnalysisError(f"cannot run git ({exc.strerror}); install git on the manager's machine") from None
    output = asyncio.ensure_future(proc.communicate())
    started, problem = time.monotonic(), ""
    try:
        while not output.done():
            await asyncio.wait({output}, timeout=POLL_SECONDS)
            if output.done():
                break
            if time.monotonic() - started > timeout:
                problem = f"{what} of {url.given} took longer than {timeout:g} s and was stopped"
            elif watch is not None and max_bytes and tree_bytes(watch) > max_bytes:
                problem = f"{what} of {url.given} grew larger than {mb(max_bytes)} and was stopped"
            if problem:
                raise AnalysisError(problem + "; analyze a smaller repository or ask the operator to raise the limit")
    except BaseException:  # a limit, or the call was cancelled: git and its children go too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(BaseException):
            await asyncio.shield(output)
        raise
    stdout, stderr = output.result()
    if proc.returncode != 0:
        raise FetchFailed(f"{what} of {url.given} failed: {_last_lines(stderr)}")
    return stdout


async def remote_head(url: RepoUrl, timeout: float) -> str:
    """The commit the remote's HEAD points at (`git ls-remote`)."""
    out = await run_git(["ls-remote", "--", url.git, "HEAD"], url, timeout, what="git ls-remote")
    for line in out.decode("utf-8", errors="replace").splitlines():
        sha, _, ref = line.partition("\t")
        if ref == "HEAD" and len(sha) in (40, 64):
            return sha
    raise FetchFailed(f"{url.given} has no commits (or no HEAD branch) to analyze")


async def shallow_clone(url: RepoUrl, dest: Path, timeout: float, max_bytes: int) -> str:
    """`git clone --depth 1` into dest (which must not exist); returns the commit checked out."""
    args = ["clone", "--depth", "1", "--no-tags", "--single-branch", "--no-recurse-submodules", "--quiet"]
    await run_git([*args, "--", url.git, str(dest)], url, timeout, dest, max_bytes, what="git clone")
    if max_bytes and tree_bytes(dest) > max_bytes:
        raise AnalysisError(f"git clone of {url.given} is larger than {mb(max_bytes)}; analyze a smaller repository")
    out = await run_git(["-C", str(dest), "rev-parse", "HEAD"], url, timeout, what="git rev-parse")
    return out.decode().strip()
