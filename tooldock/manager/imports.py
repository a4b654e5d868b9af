"""Packages a namespace's code imports that its worker's environment would not have, found when write_tool
writes a file (before the reload that would fail on them): each module the files import (read with `ast`,
never run) that is not in the standard library, not a file or folder of the namespace itself and not in
the environment its requirements.txt makes.

The environment is read from disk, not guessed: the top-level names in the site-packages of the worker's
virtualenv for the namespace's current requirements (the process backend's cache, which the gateway uses
too). When that one is not built (requirements.txt changed since the last install; add_requirement installs
at once) nothing is reported: which modules a package provides is known only once it is installed, and a
guess would send the LLM to install packages the worker may already have, under names that are not theirs.

An import the code guards (inside `try` with an `except ImportError`, or under `if TYPE_CHECKING:`) is
optional and not reported.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

from tooldock.runtime.backends.environments import Environments

# Modules whose distribution on the index has another name: what add_requirement needs for them.
DISTRIBUTIONS = {
    "attr": "attrs",
    "bs4": "beautifulsoup4",
    "Crypto": "pycryptodome",
    "cv2": "opencv-python-headless",
    "dateutil": "python-dateutil",
    "docx": "python-docx",
    "dotenv": "python-dotenv",
    "fitz": "PyMuPDF",
    "git": "GitPython",
    "github": "PyGithub",
    "gitlab": "python-gitlab",
    "jose": "python-jose",
    "jwt": "PyJWT",
    "magic": "python-magic",
    "multipart": "python-multipart",
    "nacl": "PyNaCl",
    "OpenSSL": "pyOpenSSL",
    "PIL": "Pillow",
    "pptx": "python-pptx",
    "serial": "pyserial",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "slugify": "python-slugify",
    "socks": "PySocks",
    "yaml": "PyYAML",
    "zmq": "pyzmq",
}
_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
MAX_REPORTED = 20


def _guarded(handlers: list[ast.ExceptHandler]) -> bool:
    for handler in handlers:
        if handler.type is None:
            return True
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(n, ast.Name) and n.id in _GUARDS for n in names):
            return True
    return False


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(source: str) -> dict[str, int]:
    """Top-level modules `source` imports unguarded (absolute imports only), with the first line of each."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    found: dict[str, int] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Try | ast.TryStar) and _guarded(node.handlers):
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child)
            return
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.setdefault(alias.name.partition(".")[0], node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.setdefault(node.module.partition(".")[0], node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    try:
        visit(tree)
    except RecursionError:  # nested deeper than the interpreter's stack: what was found so far
        pass
    found.pop("__future__", None)
    return found


def provided(site_packages: Path) -> set[str]:
    """The top-level names importable from a site-packages folder: its packages, modules and extensions."""
    names: set[str] = set()
    for entry in site_packages.iterdir():
        name = entry.name
        if name.endswith((".dist-info", ".egg-info", ".pth")) or name == "__pycache__":
            continue
        names.add(name.partition(".")[0] if entry.is_file() else name)
    return names


def _site_packages(interpreter: Path) -> Path | None:
    found = sorted((interpreter.parent.parent / "lib").glob("python*/site-packages"))
    return found[0] if found else None


def missing_packages(folder: Path, requirements: str, python: str | None, envs: Environments) -> list[dict[str, Any]]:
    """`[{"module", "file", "line", "package"}]` for each module the namespace's files import that its
    environment would not provide; [] when that environment is not built."""
    interpreter = envs.ready(requirements, python)
    site = _site_packages(interpreter) if interpreter is not None else None
    if site is None:
        return []
    available = provided(site) | set(sys.stdlib_module_names)
    local = {p.name.removesuffix(".py") for p in folder.iterdir() if p.suffix == ".py" or p.is_dir()}
    missing: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for module, line in imported(text).items():
            if module in available or module in local or module in missing:
                continue
            package = DISTRIBUTIONS.get(module, module)
            missing[module] = {"module": module, "file": path.name, "line": line, "package": package}
    return list(missing.values())[:MAX_REPORTED]
