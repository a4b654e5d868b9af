"""Bad input to the manager: traversal in every path-like argument (`../x`, `/etc/passwd`, `a/../../b.py`, a
symlink inside the tools directory pointing out of it), invalid and reserved names, huge or non-UTF-8 code,
bad tool files, pip options and URLs as requirements, concurrent `write_tool` on one file and `reload_core`
during a reload. Each must be a clear error (a `ManagerError` saying what was wrong and what to do) or a
serialized answer, and nothing may be written outside the tools directory.

Most tests call the manager's functions directly on a tmp layout; a few go through the real manager
(`tooldock serve --manager`) with the official MCP SDK client, sharing one gateway per module.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import stat
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, MANAGER_ARGS, Gateway, manager_url, run_manager

from tooldock.errors import BuilderError, DependencyError, GatewayError, InvalidInput, ManagerError, Missing
from tooldock.manager import deps, files, secrets
from tooldock.manager.hints import written_hint
from tooldock.manager.reload import Reloader
from tooldock.manager.workspace import MAX_CODE_BYTES, Workspace
from tooldock.secrets import SecretStore

# -- tool sources -------------------------------------------------------------------------------------------


def tool_source(name: str = "add", body: str = "return a + b") -> str:
    return f'''"""Arithmetic."""
from fastmcp.tools import tool


@tool
async def {name}(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    {body}
'''


ARITH = tool_source("add")
OTHER = tool_source("sub", "return a - b")
GOOD = tool_source("multiply", "return a * b")
OUTSIDE_TOOL = tool_source("outside_tool", "return 0")
OUTSIDE_REQUIREMENTS = b"# outside the tools directory\nsix==1.16.0\n"
OUTSIDE_CONFIG = b"description: not ours\nsecrets: [OUTSIDE_SECRET]\n"
CALC_REQUIREMENTS = b"# pinned by hand\nsix==1.16.0\n\n"
SECRET_VALUE = "s3cr3t-value-7d41c9e0b2"  # distinctive: a search for it cannot match by chance

# -- the layout ---------------------------------------------------------------------------------------------


def snapshot(*roots: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under `roots` (symlinks not followed): kind, content or link target, mode and mtime."""
    seen: dict[str, tuple[Any, ...]] = {}

    def record(path: Path) -> None:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            seen[str(path)] = ("link", os.readlink(path), st.st_mtime_ns)
        elif stat.S_ISDIR(st.st_mode):
            seen[str(path)] = ("dir", st.st_mode, st.st_mtime_ns)
        else:
            seen[str(path)] = ("file", path.read_bytes(), st.st_mode, st.st_mtime_ns)

    for root in roots:
        record(root)
        if root.is_dir() and not root.is_symlink():
            for dirpath, dirnames, filenames in os.walk(root):  # followlinks=False: a symlinked folder is a leaf
                for name in (*dirnames, *filenames):
                    record(Path(dirpath) / name)
    return seen


class FakeInstaller:
    """The backend's installer: records each call (and what requirements.txt said then); may fail."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, folder: Path) -> None:
        requirements = folder / "requirements.txt"
        self.calls.append((folder.name, requirements.read_text() if requirements.exists() else ""))
        if self.error is not None:
            raise self.error


@dataclass
class Layout:
    """tmp/tools (calc: arith.py + other.py + requirements.txt; trap: symlinks out; link -> outside),
    tmp/outside (what the symlinks point at), tmp/store + tmp/age.key, and tmp/cwd (the working directory)."""

    root: Path
    tools: Path
    outside: Path
    ws: Workspace
    store: SecretStore
    installer: FakeInstaller = field(default_factory=FakeInstaller)

    def snap(self) -> dict[str, tuple[Any, ...]]:
        return snapshot(self.root, Path("/etc/passwd"))

    def outside_snap(self) -> dict[str, tuple[Any, ...]]:
        return snapshot(self.outside)


@pytest.fixture
def lay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Layout:
    tools, outside = tmp_path / "tools", tmp_path / "outside"
    calc, trap = tools / "calc", tools / "trap"
    for folder in (calc, trap, outside, tmp_path / "cwd"):
        folder.mkdir(parents=True)
    (calc / "arith.py").write_text(ARITH)
    (calc / "other.py").write_text(OTHER)
    (calc / "requirements.txt").write_bytes(CALC_REQUIREMENTS)
    (outside / "x.py").write_text(OUTSIDE_TOOL)
    (outside / "requirements.txt").write_bytes(OUTSIDE_REQUIREMENTS)
    (outside / "tooldock.yaml").write_bytes(OUTSIDE_CONFIG)
    (trap / "evil.py").symlink_to(outside / "x.py")  # a file that points out of the tools directory
    (trap / "ghost.py").symlink_to(outside / "new.py")  # ... at a file that does not exist (yet)
    (trap / "requirements.txt").symlink_to(outside / "requirements.txt")
    (trap / "tooldock.yaml").symlink_to(outside / "tooldock.yaml")
    (tools / "link").symlink_to(outside, target_is_directory=True)  # a namespace folder that is a symlink
    store = SecretStore(tmp_path / "store", tmp_path / "age.key")
    store.init()
    monkeypatch.chdir(tmp_path / "cwd")  # a write relative to the working directory would show in the snapshot
    return Layout(tmp_path, tools, outside, Workspace(tools), store)


HINT = re.compile(
    r"e\.g\.|\buse\b|\bgive\b|\bchoose\b|\bcreate\b|\bmust\b|\bonly\b|\brefused\b|\brewrite\b|\bsplit\b|"
    r"\bname a package\b|\bnot accepted\b|\bfix\b|\bsee \w+",
    re.I,
)


def assert_clear(err: BaseException, value: object = None, hint: bool = True) -> None:
    """A manager error whose message says what was wrong (naming the value) and what to do."""
    assert isinstance(err, ManagerError), f"{type(err).__name__}: {err}"
    assert err.message == str(err) and len(err.message) > 15, err.message
    assert not hint or HINT.search(err.message), f"no hint of what to do in: {err.message}"
    if isinstance(value, str) and 0 < len(value) <= 40 and value.isprintable():
        assert repr(value) in err.message or value in err.message, f"{value!r} not named in: {err.message}"


def refused(
    lay: Layout, action: Callable[[], Any], value: object = None, kind: type = InvalidInput, hint: bool = True
) -> ManagerError:
    """`action` raises a clear `kind` error and changes nothing anywhere (tools dir, outside, store, cwd)."""
    before = lay.snap()
    with pytest.raises(ManagerError) as caught:
        action()
    assert isinstance(caught.value, kind), f"{type(caught.value).__name__}: {caught.value}"
    assert_clear(caught.value, value, hint)
    assert lay.snap() == before
    assert lay.installer.calls == []
    return caught.value


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- traversal and bad names in every path-like argument ----------------------------------------------------

BAD_NAMES: list[Any] = [
    "../x", "../x.py", "/etc/passwd", "a/../../b.py", "..", "", "x.txt", "_system", "UPPER", "a b",
    ".", "calc/..", "calc/../..", "..\\x.py", "calc\x00", "-x", "a" * 64, "~", "$HOME",
    123, None, ["calc"], b"calc",
]

NAMESPACE_OPS: dict[str, Callable[[Layout, Any], Any]] = {
    "create_namespace": lambda lay, v: files.create_namespace(lay.ws, v),
    "delete_namespace": lambda lay, v: files.delete_namespace(lay.ws, v),
    "list_tools": lambda lay, v: files.list_tools(lay.ws, v),
    "get_tool_source": lambda lay, v: files.get_tool_source(lay.ws, v, "arith.py"),
    "write_tool": lambda lay, v: files.write_tool(lay.ws, v, "new_tool.py", GOOD),
    "delete_tool": lambda lay, v: files.delete_tool(lay.ws, v, "arith.py"),
    "list_requirements": lambda lay, v: deps.list_requirements(lay.ws, v),
    "add_requirement": lambda lay, v: run(deps.add_requirement(lay.ws, v, "httpx>=0.28", lay.installer)),
    "install_requirements": lambda lay, v: lay.ws.metadata_file(v, deps.REQUIREMENTS),
    "check_secrets": lambda lay, v: secrets.check_secrets(lay.ws, lay.store, v),
}

# The secrets tools take an optional scope: None, "" and "global" mean the global scope, anything else a name.
SCOPE_OPS: dict[str, Callable[[Layout, Any], Any]] = {
    "prepare_secret": lambda lay, v: secrets.prepare_secret(lay.ws, lay.store, "API_TOKEN", v),
    "list_secrets": lambda lay, v: secrets.list_secrets(lay.store, lay.ws, v),
    "remove_secret": lambda lay, v: secrets.remove_secret(lay.ws, lay.store, "API_TOKEN", v),
}

def _namespace_cases() -> list[Any]:
    cases = []
    for op in NAMESPACE_OPS:
        for value in BAD_NAMES:
            cases.append(pytest.param(op, value, id=f"{op}-{value!r}"))
    return cases


@pytest.mark.parametrize(("op", "value"), _namespace_cases())
def test_a_bad_namespace_is_refused_and_nothing_changes(lay, op, value):
    refused(lay, lambda: NAMESPACE_OPS[op](lay, value), value)


@pytest.mark.parametrize(
    ("op", "value"),
    [pytest.param(op, v, id=f"{op}-{v!r}") for op in SCOPE_OPS for v in BAD_NAMES if v not in ("", None)],
)
def test_a_bad_secret_scope_is_refused_and_nothing_changes(lay, op, value):
    refused(lay, lambda: SCOPE_OPS[op](lay, value), value)


@pytest.mark.parametrize("op", list(NAMESPACE_OPS))
def test_a_namespace_folder_that_is_a_symlink_out_is_refused(lay, op):
    before = lay.outside_snap()
    err = refused(lay, lambda: NAMESPACE_OPS[op](lay, "link"), "link")
    assert "symbolic link" in err.message
    assert lay.outside_snap() == before and (lay.tools / "link").is_symlink()


BAD_FILENAMES: list[Any] = [
    *BAD_NAMES, "os.py", "json.py", "__init__.py", ".hidden.py", "_private.py", "x.PY", "x.py.bak", "x.py ",
    "calc/arith.py", "arith.py/", "arith.py/..", "1st.py", "my-tool.py",
]

FILE_OPS: dict[str, Callable[[Layout, Any], Any]] = {
    "get_tool_source": lambda lay, v: files.get_tool_source(lay.ws, "calc", v),
    "write_tool": lambda lay, v: files.write_tool(lay.ws, "calc", v, GOOD),
    "delete_tool": lambda lay, v: files.delete_tool(lay.ws, "calc", v),
}


@pytest.mark.parametrize(
    ("op", "value"), [pytest.param(op, v, id=f"{op}-{v!r}") for op in FILE_OPS for v in BAD_FILENAMES]
)
def test_a_bad_filename_is_refused_and_nothing_changes(lay, op, value):
    err = refused(lay, lambda: FILE_OPS[op](lay, value), value)
    if value == "os.py":
        assert "shadows the standard-library module 'os'" in err.message


@pytest.mark.parametrize("op", list(FILE_OPS))
@pytest.mark.parametrize("filename", ["evil.py", "ghost.py"])
def test_a_tool_file_that_is_a_symlink_out_is_refused(lay, op, filename):
    """evil.py -> outside/x.py (exists), ghost.py -> outside/new.py (does not): never read, written, removed."""
    before = lay.outside_snap()
    link = lay.tools / "trap" / filename
    target = os.readlink(link)
    actions = {
        "get_tool_source": lambda: files.get_tool_source(lay.ws, "trap", filename),
        "write_tool": lambda: files.write_tool(lay.ws, "trap", filename, GOOD),
        "delete_tool": lambda: files.delete_tool(lay.ws, "trap", filename),
    }
    err = refused(lay, actions[op], filename)
    assert "symbolic link" in err.message
    assert lay.outside_snap() == before
    assert link.is_symlink() and os.readlink(link) == target
    assert not (lay.outside / "new.py").exists()
    assert (lay.outside / "x.py").read_text() == OUTSIDE_TOOL


@pytest.mark.parametrize("op", ["list_requirements", "add_requirement", "install_requirements"])
def test_a_requirements_file_that_is_a_symlink_out_is_refused(lay, op):
    err = refused(lay, lambda: NAMESPACE_OPS[op](lay, "trap"))
    assert "symbolic link" in err.message and "requirements.txt" in err.message
    assert (lay.outside / "requirements.txt").read_bytes() == OUTSIDE_REQUIREMENTS


def test_a_config_file_that_is_a_symlink_out_is_not_read(lay):
    err = refused(lay, lambda: secrets.check_secrets(lay.ws, lay.store, "trap"))
    assert "symbolic link" in err.message and "OUTSIDE_SECRET" not in err.message


def test_symlinks_in_a_namespace_are_never_listed_or_followed(lay):
    before = lay.outside_snap()
    assert files.list_tools(lay.ws, "trap") == []  # evil.py's outside_tool is not read
    assert [p.name for p in lay.ws.tool_files("trap")] == []
    assert "link" not in lay.ws.namespaces() and {"calc", "trap"} <= set(lay.ws.namespaces())
    # A tool named like the one in the file evil.py points at is not a duplicate: that file is not in the namespace.
    written = files.write_tool(lay.ws, "trap", "real.py", OUTSIDE_TOOL)
    assert written == {"written": True, "filename": "real.py", "tools_found": ["outside_tool"]}
    assert lay.outside_snap() == before


def test_deleting_a_namespace_with_symlinks_out_removes_the_links_only(lay):
    before = lay.outside_snap()
    assert files.delete_namespace(lay.ws, "trap") == {"deleted": True, "name": "trap"}
    assert lay.outside_snap() == before
    assert sorted(p.name for p in lay.tools.iterdir()) == ["calc", "link"]  # no .deleting-* leftover


def test_a_hard_link_out_is_replaced_not_written_through(lay):
    """A hard link is no symlink; the atomic rename replaces the directory entry, never the shared inode."""
    shared = lay.outside / "shared.py"
    shared.write_text(OUTSIDE_TOOL)
    os.link(shared, lay.tools / "calc" / "hard.py")
    before = lay.outside_snap()
    assert files.write_tool(lay.ws, "calc", "hard.py", GOOD)["written"] is True
    assert (lay.tools / "calc" / "hard.py").read_text() == GOOD
    assert files.delete_tool(lay.ws, "calc", "hard.py") == {"deleted": True, "filename": "hard.py"}
    assert lay.outside_snap() == before and shared.read_text() == OUTSIDE_TOOL


def test_a_missing_namespace_or_file_names_what_exists_and_what_to_do(lay):
    err = refused(lay, lambda: files.write_tool(lay.ws, "nope", "x.py", GOOD), "nope", Missing)
    assert "create_namespace" in err.message and "calc" in err.message
    err = refused(lay, lambda: files.get_tool_source(lay.ws, "calc", "nope.py"), "nope.py", Missing)
    assert "arith.py" in err.message and "list_tools" in err.message
    refused(lay, lambda: files.delete_tool(lay.ws, "calc", "nope.py"), "nope.py", Missing)
    refused(lay, lambda: files.delete_namespace(lay.ws, "nope"), "nope", Missing)
    with pytest.raises(ManagerError) as caught:
        files.create_namespace(lay.ws, "calc")
    assert caught.value.code == "already_exists" and str(lay.tools / "calc") in caught.value.message


# Names are matched whole: `$` alone would let "calc2\n", "x.py\n" and "TOKEN\n" through.


@pytest.mark.parametrize(
    "action",
    [
        pytest.param(lambda lay: files.create_namespace(lay.ws, "calc2\n"), id="create_namespace"),
        pytest.param(lambda lay: files.write_tool(lay.ws, "calc", "new_tool.py\n", GOOD), id="write_tool"),
        pytest.param(lambda lay: secrets.prepare_secret(lay.ws, lay.store, "API_TOKEN\n"), id="prepare_secret"),
        pytest.param(lambda lay: secrets.prepare_secret(lay.ws, lay.store, "API_TOKEN", "calc\n"), id="scope"),
    ],
)
def test_a_name_with_a_trailing_newline_is_refused(lay, action):
    refused(lay, lambda: action(lay))


@pytest.mark.parametrize("length", [245, 300])
def test_an_overlong_filename_is_refused_clearly(lay, length):
    refused(lay, lambda: files.write_tool(lay.ws, "calc", "a" * length + ".py", GOOD))


# -- the code argument --------------------------------------------------------------------------------------


def padded(size: int, filler: str = "#") -> str:
    """GOOD plus a trailing comment, `size` bytes in UTF-8 (filler of 1 or 2 bytes per character)."""
    head = GOOD + "# "
    room = size - len(head.encode()) - 1
    width = len(filler.encode())
    text = head + filler * (room // width) + "x" * (room % width) + "\n"
    assert len(text.encode()) == size
    return text


@pytest.mark.parametrize("target", ["new_tool.py", "arith.py"])
@pytest.mark.parametrize(
    "code",
    [
        pytest.param(padded(MAX_CODE_BYTES + 1), id="256KB+1"),
        pytest.param(padded(10 * 1024 * 1024), id="10MB"),
        pytest.param(padded(MAX_CODE_BYTES + 2, "é"), id="2-byte-chars"),  # fewer characters than bytes
    ],
)
def test_huge_code_is_refused_and_nothing_written(lay, target, code):
    err = refused(lay, lambda: files.write_tool(lay.ws, "calc", target, code))
    assert f"at most {MAX_CODE_BYTES} bytes" in err.message and "Split" in err.message
    assert str(len(code.encode())) in err.message


def test_code_of_exactly_the_limit_is_written(lay):
    code = padded(MAX_CODE_BYTES)
    assert files.write_tool(lay.ws, "calc", "big.py", code)["written"] is True
    assert (lay.tools / "calc" / "big.py").read_text(encoding="utf-8") == code
    assert files.get_tool_source(lay.ws, "calc", "big.py")["source"] == code


@pytest.mark.parametrize("target", ["new_tool.py", "arith.py"])
@pytest.mark.parametrize(
    "code",
    [
        pytest.param(GOOD.replace("Add two numbers.", "Add \ud800 numbers."), id="lone-surrogate"),
        pytest.param(GOOD + "# \udcff\n", id="surrogateescape"),
        pytest.param(GOOD.encode(), id="bytes"),
        pytest.param(None, id="None"),
        pytest.param(123, id="int"),
        pytest.param(["line"], id="list"),
    ],
)
def test_code_that_is_not_utf8_text_is_refused_and_nothing_written(lay, target, code):
    err = refused(lay, lambda: files.write_tool(lay.ws, "calc", target, code), hint=False)
    assert "UTF-8" in err.message or "must be a string" in err.message


def test_a_file_on_disk_that_is_not_utf8(lay):
    (lay.tools / "calc" / "latin.py").write_bytes(b"# caf\xe9\n" + ARITH.replace("add", "add2").encode())
    err = refused(lay, lambda: files.get_tool_source(lay.ws, "calc", "latin.py"))
    assert "latin.py is not valid UTF-8" in err.message and "write_tool" in err.message
    # Listing skips it rather than failing; rewriting it through write_tool works.
    assert {t["filename"] for t in files.list_tools(lay.ws, "calc")} == {"arith.py", "other.py"}
    assert files.write_tool(lay.ws, "calc", "latin.py", GOOD)["written"] is True
    assert files.get_tool_source(lay.ws, "calc", "latin.py")["source"] == GOOD


def test_a_file_on_disk_too_large_to_be_a_tool_file(lay):
    (lay.tools / "calc" / "blob.py").write_bytes(b"#" * (2 * 1024 * 1024))
    err = refused(lay, lambda: files.get_tool_source(lay.ws, "calc", "blob.py"), hint=False)
    assert "larger than" in err.message


@pytest.mark.parametrize(
    "action",
    [
        pytest.param(lambda lay: files.write_tool(lay.ws, "calc", "x.py", GOOD + "# \ud800\n"), id="surrogate"),
        pytest.param(lambda lay: files.get_tool_source(lay.ws, "calc", "blob.py"), id="oversized-file"),
    ],
)
def test_the_utf8_and_size_refusals_say_what_to_do(lay, action):
    (lay.tools / "calc" / "blob.py").write_bytes(b"#" * (2 * 1024 * 1024))
    refused(lay, lambda: action(lay))


BAD_TOOLS = [
    pytest.param(
        "from fastmcp.tools import tool\n\n\n@tool\ndef f(a: int) -> int\n    return a\n",
        "Syntax error", 5, "syntax_error", id="syntax-error",
    ),
    pytest.param(
        "def f(a: int) -> int:\n    \"\"\"Doc.\"\"\"\n    return a\n", "No @tool decorator found", None, "no_tools",
        id="no-tool",
    ),
    pytest.param(
        'from fastmcp.tools import tool\n\n\n@tool\ndef f(a: int,\n      b) -> int:\n    """Doc."""\n    return a\n',
        "Missing type hints", 6, "missing_type_hint", id="missing-type-hint",
    ),
    pytest.param(
        "from fastmcp.tools import tool\n\n\n@tool\ndef f(a: int) -> int:\n    return a\n",
        "Missing docstring", 5, "missing_docstring", id="missing-docstring",
    ),
    pytest.param(
        'from fastmcp.tools import tool\n\n\n@tool\ndef f(*args: int) -> int:\n    """Doc."""\n    return 0\n',
        "Invalid tool file", 5, "unsupported_parameter", id="star-args",
    ),
    pytest.param(
        'from fastmcp.tools import tool\nfrom fastmcp.utilities.authorization import require_scopes\n\n\n'
        '@tool(auth=require_scopes("admin"))\ndef f(a: int) -> int:\n    """Doc."""\n    return a\n',
        "An auth= check ToolDock cannot apply", 6, "auth_check", id="auth-check",
    ),
    pytest.param(tool_source("add"), "Duplicate tool name", None, "duplicate_tool", id="duplicate-function-name"),
    pytest.param(
        tool_source("plus").replace("@tool", '@tool(name="add")'), "Duplicate tool name", None, "duplicate_tool",
        id="duplicate-explicit-name",
    ),
    pytest.param("x = 1\0\n", "Syntax error", None, "syntax_error", id="null-byte"),
    pytest.param("", "No @tool decorator found", None, "no_tools", id="empty"),
    pytest.param(
        'from tooldock import tool\n\n\n@tool\ndef f(a: int) -> int:\n    """Doc."""\n    return a\n',
        "@tool is imported from the wrong place", 4, "wrong_import", id="tool-from-tooldock",
    ),
    pytest.param(
        '@tool\ndef f(a: int) -> int:\n    """Doc."""\n    return a\n',
        "@tool is not imported", 1, "undefined_decorator", id="tool-not-imported",
    ),
    pytest.param(
        'from mcp.server.fastmcp import FastMCP\nmcp = FastMCP("x")\n\n\n@mcp.tool()\ndef f(a: int) -> int:\n'
        '    """Doc."""\n    return a\n',
        "MCP SDK server object instead of @tool", 1, "sdk_server", id="mcp-sdk-1x",
    ),
]


@pytest.mark.parametrize("target", ["new_tool.py", "other.py"])  # a new file, and replacing another file
@pytest.mark.parametrize(("code", "headline", "line", "problem"), BAD_TOOLS)
def test_a_bad_tool_is_not_written(lay, target, code, headline, line, problem):
    before = lay.snap()
    result = files.write_tool(lay.ws, "calc", target, code)
    assert result["written"] is False and result["error"] == headline
    assert set(result) == {"written", "error", "details", "problems"}
    assert result["problems"][0]["code"] == problem and result["problems"][0]["line"] == line
    if line is not None:
        assert f"line {line}: " in result["details"]
    if problem == "duplicate_tool":
        assert "arith.py" in result["details"] and "'add'" in result["details"]
    assert lay.snap() == before  # a new file does not exist; a replaced one keeps its content (and mtime)
    if target == "other.py":
        assert (lay.tools / "calc" / "other.py").read_text() == OTHER
    else:
        assert not (lay.tools / "calc" / target).exists()


def test_every_problem_is_reported_with_its_line(lay):
    code = (
        "from fastmcp.tools import tool\n\n\n@tool\ndef f(a, b: int):\n    return a\n\n\n@tool\ndef g(c):\n    pass\n"
    )
    result = files.write_tool(lay.ws, "calc", "new_tool.py", code)
    assert result["written"] is False
    assert [(p["code"], p["line"]) for p in result["problems"]] == [
        ("missing_type_hint", 5), ("missing_docstring", 5), ("missing_type_hint", 10), ("missing_docstring", 10)]
    assert result["details"].count("\n") == 3


def test_concurrent_write_tool_on_one_file_from_threads(lay):
    """Without the manager's lock: each write is a temp file + one rename, so the result is one whole version."""
    contents = [tool_source("add", f"return a + b + {i}") for i in range(40)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda code: files.write_tool(lay.ws, "calc", "arith.py", code), contents))
    assert all(r == {"written": True, "filename": "arith.py", "tools_found": ["add"]} for r in results)
    assert (lay.tools / "calc" / "arith.py").read_text() in contents
    assert sorted(p.name for p in (lay.tools / "calc").iterdir()) == ["arith.py", "other.py", "requirements.txt"]


# -- credentials written into the code ---------------------------------------------------------------------

FAKE_GITHUB = "ghp_" + "Zq8sX2vLm4Nw7Tb1Rc9Yd3Fh6Jk0Pa5Ue2Gi"  # the shape of a GitHub token; not one
FAKE_KEY = "sk-live-" + "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
# The shapes of the AI providers' keys, which detect-secrets has no detector for (none of them is a key).
FAKE_ANTHROPIC = "sk-ant-api03-" + "Qm7vX2pLw9Rt4Nc8Yb1Kd6Hf3Js0Ga5Ue2Zi7Oq4Wr9Ty1Mx6Lp3Vn8Bs0Ck5Dj2Fh7Ag4Ez9Wu1Iy6Ro3Tl8Pm0Xc5QbAA"
FAKE_OPENAI = "sk-proj-" + "Aq1Ws2Ed3Rf4Tg5Yh6Uj7Ik8Ol9Pz0Xc1Vb2Nm3Qw4Er5Ty6Ui7Op8As9Df0Gh1Jk2Lz3Xc4Vb5Nm6"
FAKE_GOOGLE = "AIza" + "Sy9Xq2Lm4Nw7Tb1Rc9Yd3Fh6Jk0Pa5Ue2Gi"
FAKE_HF = "hf_" + "QmXvLpWrTnCyBkDhFjGaUeZiOqWrTyMxLpVn"


def credential_tool(line: str) -> str:
    return (f"import httpx\nfrom fastmcp.tools import tool\n\n{line}\n\n\n@tool\ndef f(a: int) -> int:\n"
            '    """Doc."""\n    return a\n')


@pytest.mark.parametrize(("line", "at", "name"), [
    (f'API_KEY = "{FAKE_KEY}"', 4, "API_KEY"),
    (f'HEADERS = {{"Authorization": "token {FAKE_GITHUB}"}}', 4, "HEADERS"),
    (f'client = httpx.Client(headers={{"X-Token": "{FAKE_GITHUB}"}})', 4, "CLIENT"),
    ('BASE = "https://admin:Sup3rS3cretPassw0rd@db.example.com/api"', 4, "BASE_PASSWORD"),
    (f'def auth() -> str:\n    return "{FAKE_GITHUB}"', 5, "GITHUB_TOKEN"),
    (f'client = Anthropic(api_key="{FAKE_ANTHROPIC}")', 4, "CLIENT"),
    (f'def key() -> str:\n    return "{FAKE_ANTHROPIC}"', 5, "ANTHROPIC_API_KEY"),
    (f'def key() -> str:\n    return "{FAKE_OPENAI}"', 5, "OPENAI_API_KEY"),
    (f'URL = "https://generativelanguage.googleapis.com/v1/models?key={FAKE_GOOGLE}"', 4, "URL"),
    (f'HEADERS = {{"Authorization": "Bearer {FAKE_HF}"}}', 4, "HEADERS"),
])
def test_a_credential_written_into_the_code_is_refused_and_never_repeated(lay, line, at, name):
    """An LLM given a key in the chat writes it into the tool: the file (and every image built from it) would
    hold it. Refused, with the line and what to write instead; the value is in no part of the answer."""
    before = lay.snap()
    result = files.write_tool(lay.ws, "calc", "new_tool.py", credential_tool(line))
    assert result["written"] is False and result["error"] == "A secret is written into the code", result
    problem = result["problems"][0]
    assert problem["code"] == "hardcoded_secret" and problem["line"] == at, problem
    assert f"os.environ[{name!r}]" in problem["message"] and f"prepare_secret(key={name!r}, namespace='calc')" in \
        problem["message"], problem
    said = json.dumps(result)
    assert FAKE_GITHUB not in said and FAKE_KEY not in said and "Sup3rS3cretPassw0rd" not in said
    assert all(fake not in said for fake in (FAKE_ANTHROPIC, FAKE_OPENAI, FAKE_GOOGLE, FAKE_HF))
    assert lay.snap() == before


@pytest.mark.parametrize("line", [
    'API_KEY = os.environ["API_KEY"]',
    'TOKEN = os.environ.get("GITHUB_TOKEN", "")',
    'API_KEY = "YOUR_API_KEY_HERE"',
    'PASSWORD_FIELD = "password"',
    'PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="',
    'DIGEST = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"',
    'URL = "https://api.github.com/repos/{owner}/{repo}/issues"',
    'def login(password: str = "") -> None: ...',
    'KEY_HEADER = "x-api-key"',
    f'PUBLIC_KEY = "{FAKE_KEY}"  # pragma: allowlist secret',  # the way to say a value is meant to be there
    f'EXAMPLE = "{FAKE_ANTHROPIC}"  # pragma: allowlist secret',
    'MODEL = "claude-sonnet-4-5"; TASK = "ask-anthropic-api03"',  # names near the formats, not keys
])
def test_code_that_reads_its_secrets_or_holds_data_is_written(lay, line):
    """No false alarms on what tools commonly hold: secrets read from the environment, placeholders, embedded
    data, hashes, URLs without credentials, parameters named like secrets."""
    result = files.write_tool(lay.ws, "calc", "new_tool.py", "import os\n" + credential_tool(line))
    assert result == {"written": True, "filename": "new_tool.py", "tools_found": ["f"]}, result


def test_write_tool_warns_of_tool_names_clients_may_refuse(lay):
    """Served (fastmcp serves them too), so written; but the LLM is told, while it can still rename them."""
    code = (
        "from fastmcp.tools import tool\n\n\n"
        "@tool(name='get weather')\ndef weather(city: str) -> str:\n    'Weather.'\n    return city\n\n\n"
        "@tool(name='calc.add-2')\ndef add(x: int) -> int:\n    'Add.'\n    return x\n"
    )
    result = files.write_tool(lay.ws, "calc", "names.py", code)
    assert result["written"] is True and result["tools_found"] == ["get weather", "calc.add-2"]
    assert result["name_warnings"] == [
        "tool name 'get weather' has characters MCP tool names do not allow (' '): clients may refuse the tool; "
        "use letters, digits, '_', '-' and '.' (e.g. @tool(name='get_weather'))",
    ]
    assert "name_warnings" not in files.write_tool(lay.ws, "calc", "names.py", code.replace("get weather", "get_weather"))


# -- requirements -------------------------------------------------------------------------------------------

BAD_PACKAGES = [
    ("-r x", "pip options"), ("--index-url http://x", "pip options"), ("-e .", "pip options"),
    ("  -r other.txt", "pip options"), ("--extra-index-url=http://evil/simple", "pip options"),
    ("-c constraints.txt", "pip options"), ("--pre", "pip options"),
    ("pkg @ https://x/y.whl", "direct URLs"), ("pkg@file:///etc/passwd", "direct URLs"),
    ("pkg @ git+https://github.com/x/y", "direct URLs"),
    ("https://x/y.whl", "not a valid requirement"), ("git+https://github.com/x/y", "not a valid requirement"),
    ("./local/pkg", "not a valid requirement"), ("/etc/passwd", "not a valid requirement"),
    ("../x", "not a valid requirement"), ("a/../../b.py", "not a valid requirement"),
    ("..", "not a valid requirement"), ("_system", "not a valid requirement"), ("a b", "not a valid requirement"),
    ("httpx --hash=sha256:00", "not a valid requirement"), ("httpx; os.system('x')", "not a valid requirement"),
    ("httpx\nrequests", "one line"), ("httpx\r\n-r x", "one line"), ("httpx\rrequests", "one line"),
    ("x" * 201, "at most 200"), ("", "requirement specifier"), ("   \n", "requirement specifier"),
    (None, "requirement specifier"), (123, "requirement specifier"), (["httpx"], "requirement specifier"),
]


@pytest.mark.parametrize("namespace", ["calc", "trapless"])  # with a requirements.txt, and without one
@pytest.mark.parametrize(("package", "says"), [pytest.param(p, s, id=repr(p)[:40]) for p, s in BAD_PACKAGES])
def test_a_bad_requirement_is_refused_and_the_file_unchanged(lay, namespace, package, says):
    (lay.tools / "trapless").mkdir(exist_ok=True)
    err = refused(lay, lambda: run(deps.add_requirement(lay.ws, namespace, package, lay.installer)))
    assert says in err.message
    with pytest.raises(InvalidInput):
        deps.parse_specifier(package)


@pytest.mark.parametrize("error", [DependencyError("uv pip install failed: no such package"),
                                   BuilderError("uv could not lock: no such package")])
def test_a_package_that_fails_to_install_is_not_added(lay, error):
    installer = FakeInstaller(error)
    path = lay.tools / "calc" / "requirements.txt"
    result = run(deps.add_requirement(lay.ws, "calc", "no-such-package==1.0", installer))
    assert result == {"added": False, "package": "no-such-package==1.0", "namespace": "calc", "installed": False,
                      "error": "pip install failed", "details": str(error)}
    assert installer.calls == [("calc", "six==1.16.0\nno-such-package==1.0\n")]  # tried with the new line in
    assert path.read_bytes() == CALC_REQUIREMENTS  # the previous bytes, comment and blank line included
    # A namespace that had no requirements.txt has none afterwards.
    files.create_namespace(lay.ws, "fresh")
    result = run(deps.add_requirement(lay.ws, "fresh", "no-such-package", installer))
    assert result["added"] is False and installer.calls[-1] == ("fresh", "no-such-package\n")
    assert sorted(p.name for p in (lay.tools / "fresh").iterdir()) == []


def test_a_good_requirement_replaces_the_same_package(lay):
    result = run(deps.add_requirement(lay.ws, "calc", "Six>=1.16", lay.installer))
    assert result == {"added": True, "package": "Six>=1.16", "namespace": "calc"}
    assert deps.list_requirements(lay.ws, "calc") == {"namespace": "calc", "packages": ["Six>=1.16"]}


@pytest.mark.parametrize(
    "error",
    [pytest.param(RuntimeError("installer crashed"), id="crash"), pytest.param(OSError(28, "No space"), id="oserror"),
     pytest.param(asyncio.CancelledError(), id="cancelled")],
)
def test_an_installer_that_fails_otherwise_leaves_the_file_as_it_was(lay, error):
    path = lay.tools / "calc" / "requirements.txt"
    with pytest.raises(BaseException):  # noqa: B017 - whatever it raises, the file must be put back
        run(deps.add_requirement(lay.ws, "calc", "no-such-package==1.0", FakeInstaller(error)))
    assert path.read_bytes() == CALC_REQUIREMENTS


# -- secrets ------------------------------------------------------------------------------------------------

BAD_KEYS = ["../x", "../x.py", "/etc/passwd", "a/../../b.py", "..", "", "x.txt", "a b", "KEY=VALUE", "A" * 129,
            "KEY_unencrypted", 123, None, ["KEY"]]


@pytest.mark.parametrize("op", ["prepare_secret", "remove_secret"])
@pytest.mark.parametrize("key", [pytest.param(k, id=repr(k)[:30]) for k in BAD_KEYS])
def test_a_bad_secret_name_is_refused_and_the_store_unchanged(lay, op, key):
    action = {"prepare_secret": secrets.prepare_secret, "remove_secret": secrets.remove_secret}[op]
    refused(lay, lambda: action(lay.ws, lay.store, key))


def test_no_secret_value_is_ever_returned(lay):
    (lay.tools / "calc" / "tooldock.yaml").write_text("secrets: [API_TOKEN, GLOBAL_TOKEN, LATER]\n")
    prepared = secrets.prepare_secret(lay.ws, lay.store, "API_TOKEN", "calc")
    assert prepared["status"] == "placeholder"
    lay.store.set("API_TOKEN", SECRET_VALUE, "calc")  # the human, in a terminal
    lay.store.set("GLOBAL_TOKEN", SECRET_VALUE + "-global")
    answers = [
        prepared,
        secrets.prepare_secret(lay.ws, lay.store, "API_TOKEN", "calc"),
        secrets.prepare_secret(lay.ws, lay.store, "LATER"),
        secrets.list_secrets(lay.store, lay.ws),
        secrets.list_secrets(lay.store, lay.ws, "calc"),
        secrets.check_secrets(lay.ws, lay.store, "calc"),
        secrets.secrets_status(lay.ws, lay.store, "calc"),
    ]
    assert answers[1]["status"] == "set" and "already has a value" in answers[1]["instructions"]
    assert answers[5]["satisfied"] == ["API_TOKEN", "GLOBAL_TOKEN"] and answers[5]["placeholders"] == ["LATER"]
    text = json.dumps(answers)
    assert SECRET_VALUE not in text
    assert lay.store.key_path.read_text().split("AGE-SECRET-KEY-")[1][:20] not in text


# -- declaring secrets: prepare_secret writes tooldock.yaml, check_secrets reads the code -------------------

READS_SECRETS = '''import os
from fastmcp.tools import tool


@tool
def status() -> str:
    """Which service this namespace talks to."""
    return os.getenv("SERVICE_URL", "https://example.org") + os.environ["SERVICE_TOKEN"][:0]
'''


def test_prepare_secret_declares_the_name_and_keeps_the_file_as_a_person_wrote_it(lay):
    config = lay.tools / "calc" / "tooldock.yaml"
    written = "# calc's settings\ndescription: 'Arithmetic'  # shown in lists\nsecrets: [API_TOKEN]  # the token\n"
    config.write_text(written)
    config.chmod(0o600)
    prepared = secrets.prepare_secret(lay.ws, lay.store, "SECOND_KEY", "calc")
    assert prepared["declared_in"] == "calc/tooldock.yaml" and prepared["status"] == "placeholder"
    text = config.read_text()
    assert "# calc's settings" in text and "# shown in lists" in text and "# the token" in text
    assert "'Arithmetic'" in text and "[API_TOKEN, SECOND_KEY]" in text and config.stat().st_mode & 0o777 == 0o600
    assert secrets.check_secrets(lay.ws, lay.store, "calc")["placeholders"] == ["SECOND_KEY"]
    assert secrets.prepare_secret(lay.ws, lay.store, "SECOND_KEY", "calc")["status"] == "placeholder"
    assert config.read_text() == text  # declared once
    (lay.tools / "fresh").mkdir()
    secrets.prepare_secret(lay.ws, lay.store, "FRESH_TOKEN", "fresh")
    assert (lay.tools / "fresh" / "tooldock.yaml").read_text() == "secrets:\n  - FRESH_TOKEN\n"
    secrets.prepare_secret(lay.ws, lay.store, "GLOBAL_ONLY")  # no namespace: nothing to declare
    assert sorted(p.parent.name for p in lay.tools.glob("*/tooldock.yaml")) == ["calc", "fresh", "link", "trap"]


def test_prepare_secret_for_a_name_with_a_global_value_only_declares_it(lay):
    lay.store.set("SHARED_TOKEN", SECRET_VALUE)  # global, set by a person earlier
    prepared = secrets.prepare_secret(lay.ws, lay.store, "SHARED_TOKEN", "calc")
    assert prepared["scope"] == "global" and prepared["status"] == "set"
    assert "receives" in prepared["instructions"] and "--namespace calc" in prepared["instructions"]
    assert secrets.list_secrets(lay.store, lay.ws, "calc") == []  # no placeholder hiding the global value
    assert secrets.check_secrets(lay.ws, lay.store, "calc")["satisfied"] == ["SHARED_TOKEN"]
    assert SECRET_VALUE not in json.dumps(prepared)


@pytest.mark.parametrize(
    "config",
    ["secrets: [API_TOKEN\n", "secrets: API_TOKEN\n", "- a list\n", "secrets: [bad-name]\n", b"\xff\xfe"],
    ids=["not-yaml", "not-a-list", "not-a-mapping", "bad-name", "not-utf8"],
)
def test_prepare_secret_leaves_a_broken_tooldock_yaml_and_the_store_alone(lay, config):
    path = lay.tools / "calc" / "tooldock.yaml"
    path.write_bytes(config if isinstance(config, bytes) else config.encode())
    err = refused(lay, lambda: secrets.prepare_secret(lay.ws, lay.store, "NEW_TOKEN", "calc"))
    assert "calc/tooldock.yaml" in err.message


def test_secrets_an_upstream_server_refers_to_count_as_declared(lay):
    (lay.tools / "remote").mkdir()
    (lay.tools / "remote" / "tools.toml").write_text(
        '[[servers]]\nnamespace = "r"\nurl = "http://127.0.0.1:9/mcp"\nheaders = { Authorization = "Bearer ${secret:REMOTE_TOKEN}" }\n'
    )
    assert secrets.check_secrets(lay.ws, lay.store, "remote")["missing"] == ["REMOTE_TOKEN"]
    prepared = secrets.prepare_secret(lay.ws, lay.store, "REMOTE_TOKEN", "remote")
    assert prepared["status"] == "placeholder" and prepared["declared_in"] == "remote/tools.toml"
    assert not (lay.tools / "remote" / "tooldock.yaml").exists()
    assert secrets.check_secrets(lay.ws, lay.store, "remote")["placeholders"] == ["REMOTE_TOKEN"]

def test_tool_files_and_requirements_are_refused_in_an_upstream_namespace(lay):
    """A .py file in a folder with a tools.toml is never loaded and blocks every later reload of it."""
    (lay.tools / "remote").mkdir()
    (lay.tools / "remote" / "tools.toml").write_text('[[servers]]\nnamespace = "r"\nurl = "http://127.0.0.1:9/mcp"\n')
    for action in (lambda: files.write_tool(lay.ws, "remote", "a.py", ARITH),
                   lambda: run(deps.add_requirement(lay.ws, "remote", "six", lay.installer))):
        err = refused(lay, action)
        assert "serves upstream MCP servers (its tools.toml)" in err.message and "create_namespace" in err.message


def test_check_secrets_and_write_tool_name_secrets_the_code_reads_but_does_not_declare(lay):
    answer = files.write_tool(lay.ws, "calc", "service.py", READS_SECRETS)
    assert answer["written"] and written_hint(lay.ws, "calc", containers=False) == {
        "undeclared_secrets": ["SERVICE_TOKEN"],  # SERVICE_URL is no secret
        "next_steps": [secrets.declare_step("SERVICE_TOKEN", "calc")],
    }
    checked = secrets.check_secrets(lay.ws, lay.store, "calc")
    assert checked["undeclared"] == ["SERVICE_TOKEN"] and "prepare_secret('SERVICE_TOKEN', 'calc')" in checked[
        "next_steps"
    ][0]
    assert secrets.secrets_status(lay.ws, lay.store, "calc") == "missing"
    secrets.prepare_secret(lay.ws, lay.store, "SERVICE_TOKEN", "calc")
    checked = secrets.check_secrets(lay.ws, lay.store, "calc")
    assert checked["undeclared"] == [] and checked["placeholders"] == ["SERVICE_TOKEN"]
    assert written_hint(lay.ws, "calc", containers=False) == {}


def test_write_tool_says_when_the_code_calls_hosts_its_containers_cannot_reach(lay):
    calls = READS_SECRETS.replace('"https://example.org"', '"https://api.openweathermap.org/data/2.5/weather"')
    files.write_tool(lay.ws, "calc", "service.py", calls)
    secrets.prepare_secret(lay.ws, lay.store, "SERVICE_TOKEN", "calc")
    assert written_hint(lay.ws, "calc", containers=False) == {}  # the process backend: no network rule
    hint = written_hint(lay.ws, "calc", containers=True)
    assert hint["no_network_for"] == ["api.openweathermap.org"] and "undeclared_secrets" not in hint
    assert "ask the user to add `network: egress` to calc/tooldock.yaml" in hint["next_steps"][0]
    config = lay.tools / "calc" / "tooldock.yaml"
    config.write_text(config.read_text() + "network: egress\n")  # the person grants it
    assert written_hint(lay.ws, "calc", containers=True) == {}


# -- reload_core during a reload ----------------------------------------------------------------------------


class SleepyGateway:
    """A gateway whose reload takes a while; counts reloads and how many ran at once."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay, self.runs, self.in_flight, self.most = delay, 0, 0, 0

    async def reload(self, retry_failed: bool = True) -> dict[str, Any]:
        self.runs += 1
        run_number = self.runs
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return {"reloaded": True, "run": run_number, "namespaces": [], "failed": {}}


class GatedGateway:
    """A gateway whose reload number n signals `began[n]` and finishes when the test sets `release[n]`."""

    def __init__(self, fail: set[int] | None = None) -> None:
        self.runs, self.fail = 0, fail or set()
        self.began: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self.release: defaultdict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self.retried: dict[int, bool] = {}

    async def reload(self, retry_failed: bool = True) -> dict[str, Any]:
        self.runs += 1
        number = self.runs
        self.retried[number] = retry_failed
        self.began[number].set()
        await self.release[number].wait()
        if number in self.fail:
            raise GatewayError("the gateway at http://127.0.0.1:1 is not reachable")
        return {"reloaded": True, "run": number, "namespaces": ["calc"], "failed": {}}


@pytest.mark.parametrize("callers", [2, 5, 20])
def test_concurrent_reload_core_costs_at_most_two_reloads(callers):
    async def burst() -> tuple[SleepyGateway, Reloader, list[dict[str, Any]]]:
        gateway = SleepyGateway()
        reloader = Reloader(gateway)  # type: ignore[arg-type]
        return gateway, reloader, await asyncio.gather(*(reloader.reload_core() for _ in range(callers)))

    gateway, reloader, results = run(burst())
    assert len(results) == callers and all(r["reloaded"] is True for r in results)
    assert gateway.runs <= 2 and gateway.most == 1 and reloader.count == gateway.runs
    assert sum(1 for r in results if not r.get("shared")) == gateway.runs
    assert all(r["failed"] == {} and isinstance(r["seconds"], float) for r in results)


def test_a_caller_arriving_during_a_reload_gets_the_next_one():
    """Ticket semantics: an answer always comes from a reload that started after the caller arrived."""

    async def scenario() -> tuple[GatedGateway, list[dict[str, Any]]]:
        gateway = GatedGateway()
        reloader = Reloader(gateway)  # type: ignore[arg-type]
        a = asyncio.ensure_future(reloader.reload_core())
        await gateway.began[1].wait()
        b, c = asyncio.ensure_future(reloader.reload_core()), asyncio.ensure_future(reloader.reload_core())
        await asyncio.sleep(0.01)  # b and c have their tickets, reload 1 is still running
        gateway.release[1].set()
        await gateway.began[2].wait()
        d = asyncio.ensure_future(reloader.reload_core())  # arrives while reload 2 (b's, covering c) runs
        await asyncio.sleep(0.01)
        gateway.release[2].set()
        await gateway.began[3].wait()
        gateway.release[3].set()
        answers = list(await asyncio.gather(a, b, c, d))
        gateway.release[4].set()
        e = await reloader.reload_core()  # after everything finished: a reload of its own, not a stale answer
        return gateway, [*answers, e]

    gateway, (a, b, c, d, e) = run(scenario())
    assert (a["run"], b["run"], c["run"], d["run"]) == (1, 2, 2, 3)
    assert "shared" not in a and "shared" not in b and c["shared"] is True and "shared" not in d
    assert gateway.runs == 4 and e["run"] == 4 and "shared" not in e


def test_a_watcher_reload_retries_failed_namespaces_only_when_a_caller_it_answers_asked():
    """The file watcher asks for no retry of failed namespaces; an LLM's reload_core answered by the same
    run does, so that run retries them."""

    async def scenario() -> GatedGateway:
        gateway = GatedGateway()
        reloader = Reloader(gateway)  # type: ignore[arg-type]
        a = asyncio.ensure_future(reloader.reload_core(retry_failed=False))
        await gateway.began[1].wait()
        b = asyncio.ensure_future(reloader.reload_core(retry_failed=False))
        c = asyncio.ensure_future(reloader.reload_core())  # waits with b: one run answers both
        await asyncio.sleep(0.01)
        gateway.release[1].set()
        await gateway.began[2].wait()
        gateway.release[2].set()
        await asyncio.gather(a, b, c)
        gateway.release[3].set()
        await reloader.reload_core(retry_failed=False)
        return gateway

    gateway = run(scenario())
    assert gateway.retried == {1: False, 2: True, 3: False}


def test_a_failed_reload_does_not_answer_the_callers_waiting_for_it():
    async def scenario() -> tuple[GatedGateway, list[Any]]:
        gateway = GatedGateway(fail={1})
        reloader = Reloader(gateway)  # type: ignore[arg-type]
        a = asyncio.ensure_future(reloader.reload_core())
        await gateway.began[1].wait()
        b, c = asyncio.ensure_future(reloader.reload_core()), asyncio.ensure_future(reloader.reload_core())
        await asyncio.sleep(0.01)
        gateway.release[1].set()
        await gateway.began[2].wait()
        gateway.release[2].set()
        return gateway, list(await asyncio.gather(a, b, c, return_exceptions=True))

    gateway, (a, b, c) = run(scenario())
    assert isinstance(a, GatewayError) and "not reachable" in a.message
    assert b["run"] == 2 and c["run"] == 2 and c["shared"] is True and gateway.runs == 2


class Unreachable:
    """A Docker client whose engine does not answer."""

    class containers:  # noqa: N801 (docker-py's attribute)
        @staticmethod
        def list(**_: Any) -> list[Any]:
            from docker.errors import DockerException

            raise DockerException("engine down")


def test_namespaces_deleted_on_docker_are_remembered_across_a_manager_restart(tmp_path, capsys):
    """delete_namespace on docker leaves its containers to the next reload_core; a manager restarted before
    that read nothing and left them running for good. The list is kept in the state directory, per tools
    directory, written atomically; a namespace made again drops out of it."""
    from tooldock.manager.rebuild import DockerRebuild
    from tooldock.runtime.settings import Settings

    settings = Settings(bearer_token="t", state_dir=tmp_path / "state")
    tools, other = tmp_path / "tools", tmp_path / "other-tools"
    tools.mkdir(), other.mkdir()

    def manager(root: Path) -> DockerRebuild:
        return DockerRebuild(Workspace(root), settings, tmp_path / "cache")

    first = manager(tools)
    first.forget("gone")
    first.forget("again")
    assert manager(tools).deleted == {"gone", "again"}  # a restarted manager still removes them
    assert manager(other).deleted == set()  # another tools directory's manager does not
    assert stat.S_IMODE(first.pending.stat().st_mode) == 0o600
    assert [p.name for p in first.pending.parent.iterdir()] == ["manager-deleted.json"]  # no temporary left
    (tools / "again").mkdir()
    restarted, failed = manager(tools), {}
    assert restarted._remove_deleted(Unreachable(), failed) == {}
    assert "could not be removed: engine down" in failed["gone"] and "again" not in failed
    assert restarted.deleted == {"gone"} and manager(tools).deleted == {"gone"}  # tried again next time
    first.pending.write_text("{not json")
    assert manager(tools).deleted == set() and "is unreadable" in capsys.readouterr().err


# -- through the real manager (MCP SDK client against `tooldock serve --manager`) --------------------------


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("manager-input")
    store = SecretStore(tmp / "store", tmp / "age.key")
    store.init()
    env = {"TOOLDOCK_SECRETS_DIR": str(store.directory), "TOOLDOCK_AGE_KEY_FILE": str(store.key_path)}
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES / "basic-tool", tools / "basic-tool", ignore=shutil.ignore_patterns("__pycache__"))
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "x.py").write_text(OUTSIDE_TOOL)
    gateway = Gateway(tools, tmp / "gateway.log", env, MANAGER_ARGS)
    try:
        gateway.start()
        yield gateway, manager_url(gateway), store, tmp
    finally:
        gateway.stop()


def _outside_state(tmp: Path) -> dict[str, tuple[Any, ...]]:
    state = snapshot(tmp, Path("/etc/passwd"))
    return {k: v for k, v in state.items() if not k.endswith("gateway.log") and "__pycache__" not in k}


@pytest.mark.slow
def test_mcp_unknown_or_missing_argument_names_are_a_clear_error_and_nothing_runs(manager):
    """The SDK ignores arguments a tool does not take: `test_tool(arguments=...)` ran the tool with no input."""
    gateway, url, store, _ = manager
    import httpx2
    from conftest import TOKEN
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def flow(call):
        return {
            "wrong_name": await call("test_tool", namespace="basic-tool", tool_name="say_hello",
                                     arguments={"name": "Ada"}),
            "renamed": await call("prepare_secret", name="RENAMED_TOKEN"),
            "extra": await call("health", verbose=True),
            "missing": await call("write_tool", namespace="basic-tool", filename="x.py"),
            "right": await call("test_tool", namespace="basic-tool", tool_name="say_hello", input={"name": "Ada"}),
            "optional_left_out": await call("list_secrets"),
        }

    results = run_manager(url, flow)
    wrong, renamed, extra, missing = (results[k] for k in ("wrong_name", "renamed", "extra", "missing"))
    assert wrong == (True, "Error executing tool test_tool: invalid_arguments: unknown argument 'arguments': "
                     "test_tool takes namespace (required), tool_name (required), input. Nothing was done; call it "
                     "again with those names")
    assert renamed[0] and "unknown argument 'name'; missing required argument 'key'" in renamed[1]
    assert extra[0] and "health takes no arguments" in extra[1] and "without arguments" in extra[1]
    assert missing[0] and "missing required argument 'code'" in missing[1]
    assert results["right"] == (False, {"success": True, "result": "Hello, Ada!"})
    assert results["optional_left_out"][0] is False
    assert "RENAMED_TOKEN" not in json.dumps(store.statuses()) and not (gateway.tools_dir / "basic-tool" / "x.py").exists()

    async def modern() -> Any:  # 2026-07-28: no session, the same answer
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="2026-07-28") as client:
                return await client.call_tool("health", {"verbose": True})

    answer = asyncio.run(modern())
    assert answer.is_error and "health takes no arguments" in answer.content[0].text


@pytest.mark.slow
def test_mcp_bad_input_is_an_error_result_and_nothing_changes(manager):
    gateway, url, _, tmp = manager
    (gateway.tools_dir / "basic-tool" / "evil.py").symlink_to(tmp / "outside" / "x.py")
    before = _outside_state(tmp)
    huge = padded(MAX_CODE_BYTES + 1)

    async def flow(call):
        return {
            "reserved": await call("create_namespace", name="_system"),
            "delete_reserved": await call("delete_namespace", name="_system"),
            "traversal_ns": await call("create_namespace", name="../x"),
            "delete_dotdot": await call("delete_namespace", name=".."),
            "write_up": await call("write_tool", namespace="basic-tool", filename="../x.py", code=GOOD),
            "write_abs": await call("write_tool", namespace="basic-tool", filename="/etc/passwd", code=GOOD),
            "write_ns_up": await call("write_tool", namespace="../basic-tool", filename="x.py", code=GOOD),
            "read_nested": await call("get_tool_source", namespace="basic-tool", filename="a/../../b.py"),
            "read_link": await call("get_tool_source", namespace="basic-tool", filename="evil.py"),
            "write_link": await call("write_tool", namespace="basic-tool", filename="evil.py", code=GOOD),
            "delete_link": await call("delete_tool", namespace="basic-tool", filename="evil.py"),
            "huge": await call("write_tool", namespace="basic-tool", filename="huge.py", code=huge),
            "not_a_string": await call("write_tool", namespace="basic-tool", filename="n.py", code=123),
            "pip_option": await call("add_requirement", namespace="basic-tool", package="-r /etc/passwd"),
            "url": await call("add_requirement", namespace="basic-tool", package="pkg @ https://x/y.whl"),
            "bad_key": await call("prepare_secret", key="../x"),
            "bad_scope": await call("list_secrets", namespace="/etc"),
            "list_link": await call("list_tools", namespace="basic-tool"),
        }

    try:
        results = run_manager(url, flow)
    finally:
        after = _outside_state(tmp)
        (gateway.tools_dir / "basic-tool" / "evil.py").unlink()
    assert after == before
    listed = results.pop("list_link")
    assert listed == (False, [{"name": "say_hello", "description": listed[1][0]["description"],
                               "filename": "hello.py", "served": True}])
    for name, (is_error, text) in results.items():
        assert is_error, f"{name}: {text}"
        assert isinstance(text, str) and len(text) > 20, f"{name}: {text}"
    assert "reserved" in results["reserved"][1] and "reserved" in results["delete_reserved"][1]
    assert "invalid_input: " in results["write_up"][1] and "must not contain a path" in results["write_up"][1]
    assert "symbolic link" in results["read_link"][1] and "symbolic link" in results["write_link"][1]
    assert "at most 262144 bytes" in results["huge"][1]
    assert "pip options are not accepted" in results["pip_option"][1]
    assert "direct URLs are not accepted" in results["url"][1]
    assert (tmp / "outside" / "x.py").read_text() == OUTSIDE_TOOL
    assert sorted(p.name for p in (gateway.tools_dir / "basic-tool").iterdir() if p.name != "__pycache__") == [
        "hello.py"]


@pytest.mark.slow
def test_mcp_concurrent_write_tool_on_one_file(manager):
    gateway, url, _, _ = manager
    contents = [tool_source("add", f"return a + b + {i}") for i in range(20)]

    async def flow(call):
        assert await call("create_namespace", name="race") == (False, {
            "created": True, "path": str((gateway.tools_dir / "race").resolve())})
        calls, kinds = [], []
        for i, code in enumerate(contents):  # reads interleaved with the writes
            calls.append(call("write_tool", namespace="race", filename="arith.py", code=code))
            kinds.append("write")
            if i % 2:
                calls.append(call("get_tool_source", namespace="race", filename="arith.py"))
                kinds.append("read")
        answers = await asyncio.gather(*calls)
        return list(zip(kinds, answers, strict=True)), await call("get_tool_source", namespace="race",
                                                                  filename="arith.py")

    answers, final = run_manager(url, flow)
    writes = [a for kind, a in answers if kind == "write"]
    reads = [a for kind, a in answers if kind == "read"]
    assert len(writes) == 20 and len(reads) == 10
    assert all(w == (False, {"written": True, "filename": "arith.py", "tools_found": ["add"]}) for w in writes)
    for is_error, read in reads:  # each read sees no file yet, or one whole version
        assert (is_error and "no file 'arith.py'" in read) or (not is_error and read["source"] in contents)
    on_disk = (gateway.tools_dir / "race" / "arith.py").read_text()
    assert on_disk in contents and final == (False, {"filename": "arith.py", "source": on_disk})
    assert sorted(p.name for p in (gateway.tools_dir / "race").iterdir()) == ["arith.py"]  # no temp files left


@pytest.mark.slow
def test_mcp_reload_core_during_a_reload(manager):
    _, url, _, _ = manager

    async def flow(call):
        before = (await call("health"))[1]["reloads"]
        answers = await asyncio.gather(*(call("reload_core") for _ in range(5)))
        return before, answers, (await call("health"))[1]["reloads"]

    before, answers, after = run_manager(url, flow)
    assert len(answers) == 5
    for is_error, answer in answers:
        assert not is_error, answer
        assert answer["reloaded"] is True and "basic-tool" in answer["namespaces"] and answer["failed"] == {}
    own = [a for _, a in answers if not a.get("shared")]
    assert own, answers  # at least one call reloaded (the others may share its answer)
    assert after - before == len(own)  # each answer not shared is one gateway reload
    print(f"\nreload_core x5 during one another: {len(own)} gateway reload(s), {5 - len(own)} shared answer(s)")


@pytest.mark.slow
def test_mcp_secrets_tools_never_show_a_value(manager):
    gateway, url, store, _ = manager

    async def prepare(call):
        assert not (await call("create_namespace", name="vault"))[0]
        return await call("prepare_secret", key="VAULT_TOKEN", namespace="vault")

    prepared = run_manager(url, prepare)
    (gateway.tools_dir / "vault" / "tooldock.yaml").write_text("secrets: [VAULT_TOKEN, SHARED_TOKEN, LATER]\n")
    assert prepared[0] is False and prepared[1]["status"] == "placeholder"
    store.set("VAULT_TOKEN", SECRET_VALUE, "vault")  # the human, in a terminal, on the same store
    store.set("SHARED_TOKEN", SECRET_VALUE + "-shared")

    async def inspect(call):
        return [
            await call("prepare_secret", key="VAULT_TOKEN", namespace="vault"),
            await call("prepare_secret", key="LATER"),
            await call("list_secrets"),
            await call("list_secrets", namespace="vault"),
            await call("check_secrets", namespace="vault"),
            await call("list_namespaces"),
            await call("server_config"),
        ]

    results = run_manager(url, inspect)
    assert all(not is_error for is_error, _ in results), results
    again, later, listed, scoped, checked, namespaces, _ = [r for _, r in results]
    assert again["status"] == "set" and later["status"] == "placeholder"
    assert {"key": "VAULT_TOKEN", "scope": "vault", "status": "set"} in listed
    assert {"key": "SHARED_TOKEN", "scope": "global", "status": "set"} in listed
    assert scoped == [{"key": "VAULT_TOKEN", "scope": "vault", "status": "set"}]
    assert checked["satisfied"] == ["VAULT_TOKEN", "SHARED_TOKEN"] and checked["placeholders"] == ["LATER"]
    assert next(n for n in namespaces if n["name"] == "vault")["secrets_status"] == "placeholders"
    text = json.dumps([prepared, results])
    assert SECRET_VALUE not in text and "AGE-SECRET-KEY" not in text
    assert store.key_path.read_text().split("AGE-SECRET-KEY-")[1][:20] not in text


def test_deleting_a_namespace_names_the_secrets_the_store_keeps_for_it(lay, tmp_path):
    secrets.prepare_secret(lay.ws, lay.store, "CALC_TOKEN", "calc")
    secrets.prepare_secret(lay.ws, lay.store, "SHARED_TOKEN")  # global: not the namespace's
    assert files.delete_namespace(lay.ws, "calc") == {"deleted": True, "name": "calc"}
    kept = secrets.kept_after_delete(lay.store, "calc")
    assert kept["secrets_kept"] == ["CALC_TOKEN"]
    assert "remove_secret('CALC_TOKEN', 'calc')" in kept["next_steps"][0]
    assert secrets.kept_after_delete(lay.store, "trap") == {}  # none kept: nothing added
    unreadable = SecretStore(tmp_path / "no-store", tmp_path / "no.key")  # never initialised
    assert secrets.kept_after_delete(unreadable, "calc") == {}


def test_a_description_given_to_the_decorator_is_written_and_listed(lay):
    code = ('from fastmcp.tools import tool\n\n\n@tool(description="Doubles x.\\n\\nMore words.")\n'
            "def double(x: int) -> int:\n    return 2 * x\n")
    assert files.write_tool(lay.ws, "calc", "double.py", code)["written"] is True
    listed = {t["name"]: t for t in files.list_tools(lay.ws, "calc")}
    assert listed["double"]["description"] == "Doubles x."
    refused_code = code.replace('description="Doubles x.\\n\\nMore words."', 'title="Double"')
    answer = files.write_tool(lay.ws, "calc", "double2.py", refused_code)
    assert answer["written"] is False and answer["error"] == "Missing docstring"
    assert not (lay.tools / "calc" / "double2.py").exists()
