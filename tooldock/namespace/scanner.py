"""Scan a tools directory into namespaces (seed 000, "Drop-in Namespace Convention").

Rules: a sub-directory is a namespace; `.py` files in it with `@tool` functions contribute tools; names
starting with `_` or `.` and `__pycache__/` are ignored; `requirements.txt`, `tooldock.yaml`, `README.md`
and `LICENSE` are metadata; a `tests/` folder holds the namespace's own tests (`tooldock test`): not tools,
not in its image, and an edit there restarts nothing. Everything wrong is returned as `Problem`s; scanning
never raises for bad content, only for a tools directory that does not exist.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

from tooldock.namespace.config import read_config
from tooldock.namespace.models import NamespaceSource, Problem, ScanResult, ToolFile
from tooldock.namespace.names import NamespaceNameError, shadows_stdlib, validate_namespace_name
from tooldock.namespace.toolsfile import TOOLS_FILE, declared_secrets, read_tools_file
from tooldock.namespace.validate import validate_source

REQUIREMENTS_FILE = "requirements.txt"
TESTS_DIR = "tests"  # the namespace's own tests: not served, not built into its image


def is_test_path(rel: str) -> bool:
    """Whether a path relative to a namespace folder is in its `tests/` folder."""
    return rel == TESTS_DIR or rel.startswith(TESTS_DIR + "/")


MAX_TOOL_FILE_BYTES = 1_000_000


def _ignored(name: str) -> bool:
    return name.startswith((".", "_"))


def requirements_text(path: Path) -> str:
    """A `requirements.txt` as its environment's key reads it ("" when there is none)."""
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Path.resolve on Python 3.11)
        return False


def fingerprint(folder: Path) -> str:
    """A hash of every file the worker could read: a change anywhere restarts that namespace only."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(folder):
        top = Path(dirpath) == folder
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git") and not (top and d == TESTS_DIR))
        for name in sorted(filenames):
            if name.endswith((".pyc", ".sock")):
                continue
            path = Path(dirpath) / name
            rel = path.relative_to(folder).as_posix()
            try:
                data = path.read_bytes() if _inside(path, folder) else b"<outside>"
            except OSError:
                data = b"<unreadable>"
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def scan_upstream(folder: Path) -> NamespaceSource:
    """A folder with a `tools.toml`: its servers, plus the secrets its env and headers refer to as declared
    secrets of the namespace (so `tooldock secrets` knows them). A folder serves either tool files or
    upstream servers, never both: `.py` files next to a `tools.toml` are reported and not loaded."""
    config, config_problem = read_config(folder)
    upstream, problem = read_tools_file(folder)
    problems = [p for p in (config_problem, problem) if p is not None]
    for path in sorted(folder.glob("*.py")):
        if not _ignored(path.name):
            problems.append(
                Problem(
                    path.name,
                    f"not loaded: this folder has a {TOOLS_FILE}, so it serves upstream MCP servers only; "
                    "move tool files to a namespace folder of their own",
                    None,
                    "mixed_namespace",
                )
            )
    if upstream is not None:
        config = replace(config, secrets=declared_secrets(config.secrets, upstream))
    return NamespaceSource(
        name=folder.name,
        path=folder.resolve(),
        files=(),
        problems=tuple(problems),
        config=config,
        requirements="",
        fingerprint=fingerprint(folder),
        is_upstream=True,
        upstream=upstream if config_problem is None else None,
    )


def scan_namespace(folder: Path) -> NamespaceSource:
    """One namespace folder. The folder name must already be a valid namespace name."""
    if (folder / TOOLS_FILE).is_file():
        return scan_upstream(folder)
    config, config_problem = read_config(folder)
    problems: list[Problem] = [config_problem] if config_problem else []
    files: list[ToolFile] = []
    seen: dict[str, str] = {}
    versioned: set[str] = set()  # tool names some file serves with version=
    for path in sorted(folder.glob("*.py")):
        if _ignored(path.name) or not path.is_file():
            continue
        if not _inside(path, folder):
            problems.append(Problem(path.name, "file is a link to outside the namespace folder; copy it in"))
            continue
        shadowed = shadows_stdlib(path.name)
        if shadowed:
            problems.append(Problem(path.name, shadowed, None, "shadows_stdlib"))
            continue
        if path.stat().st_size > MAX_TOOL_FILE_BYTES:
            problems.append(
                Problem(
                    path.name,
                    f"file is larger than {MAX_TOOL_FILE_BYTES} bytes, the limit for a tool file (not served); split "
                    "it into several files, or move large data out of the code into a file the tools read",
                )
            )
            continue
        try:
            source = path.read_text(encoding="utf-8-sig")  # as Python reads it: a leading BOM is no character
        except UnicodeDecodeError:
            problems.append(Problem(path.name, "file is not valid UTF-8 text", None, "syntax_error"))
            continue
        report = validate_source(path.name, source)
        problems.extend(_unserved(p) if report.ok else p for p in report.problems)
        if not report.ok:
            continue
        dupes = [t for t in report.tools if t in seen and not (t in report.versioned and t in versioned)]
        if dupes:
            problems.append(
                Problem(
                    path.name,
                    f"tool name(s) {', '.join(dupes)} already defined in {seen[dupes[0]]}; "
                    "rename them (tool names are unique per namespace)",
                    None,
                    "duplicate_tool",
                )
            )
            continue
        seen.update({t: path.name for t in report.tools if t not in seen})
        versioned.update(report.versioned)
        files.append(ToolFile(path.name, report.tools, tuple(line for _, line in report.functions)))
    if config_problem or any(p.code == "shadows_stdlib" for p in problems):
        # An unreadable config must not start with guessed limits; a file named like a standard-library
        # module breaks imports in the worker even unloaded (the folder is on its import path).
        files = []
    requirements = requirements_text(folder / REQUIREMENTS_FILE)
    return NamespaceSource(
        name=folder.name,
        path=folder.resolve(),
        files=tuple(files),
        problems=tuple(problems),
        config=config,
        requirements=requirements,
        fingerprint=fingerprint(folder),
    )


def _unserved(problem: Problem) -> Problem:
    """A tool's own problem in a file that loads: the file's other tools are served, this one is not."""
    return Problem(problem.file, f"{problem.message} (not served until then)", problem.line, problem.code)


def scan_tools_dir(tools_dir: Path, upstream_only: bool = False) -> ScanResult:
    """Every namespace folder; with `upstream_only` (the docker backend, whose tool namespaces are containers)
    only the folders holding a `tools.toml`."""
    if not tools_dir.is_dir():
        raise FileNotFoundError(f"tools directory {str(tools_dir)!r} does not exist or is not a directory")
    namespaces: list[NamespaceSource] = []
    problems: list[Problem] = []
    for entry in sorted(tools_dir.iterdir()):
        if not entry.is_dir() or _ignored(entry.name) or (upstream_only and not (entry / TOOLS_FILE).is_file()):
            continue
        try:
            validate_namespace_name(entry.name)
        except NamespaceNameError as exc:
            problems.append(Problem(entry.name + "/", str(exc), None, "invalid_namespace_name"))
            continue
        namespaces.append(scan_namespace(entry))
    return ScanResult(tuple(namespaces), tuple(problems))
