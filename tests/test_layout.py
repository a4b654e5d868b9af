"""The code's shape, kept by tests: modules stay small, and the import rules are a tool's job (these
tests make sure the tool really runs the contracts; scripts/check runs it over the tree)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tooldock"
MAX_LINES = 400
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_no_module_over_400_lines_without_a_reason() -> None:
    """A module over 400 lines must say why in a comment starting `# size:`."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > MAX_LINES and "# size:" not in text:
            too_long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not too_long, f"split these modules or say why they are long (# size: ...): {too_long}"


def _copy_package(tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "tooldock", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail("lint-imports is not installed: install the test extras (scripts/test does)")
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=tree, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)}, timeout=120)


def test_import_contracts_hold(tmp_path: Path) -> None:
    result = _lint(_copy_package(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("module", "bad_import", "contract"), [
    ("worker/protocol.py", "import tooldock.runtime.engine", "The worker (in every image)"),
    ("runtime/http/rest.py", "import tooldock.runtime.backends.process", "Front ends reach workers only"),
    ("runtime/backends/process.py", "import tooldock.runtime.mcp.server", "Backends import no front end"),
    ("runtime/engine.py", "import tooldock.runtime.http.rest", "Inside the gateway"),
    ("builder/build.py", "import tooldock.runtime.registry", "Packages import downward"),
    ("namespace/scanner.py", "import docker", "The worker (in every image)"),
    ("dashboard/pages.py", "import tooldock.runtime.engine", "The dashboard (static files and its JSON endpoints)"),
])
def test_a_wrong_import_is_caught(tmp_path: Path, module: str, bad_import: str, contract: str) -> None:
    tree = _copy_package(tmp_path)
    target = tree / "tooldock" / module
    target.write_text(target.read_text() + f"\n{bad_import}  # deliberately wrong\n")
    result = _lint(tree)
    assert result.returncode != 0, f"lint-imports accepted `{bad_import}` in {module}"
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, broken
