"""write_tool's `missing_packages`: the modules a namespace's files import that its worker's environment
would not have (tooldock/manager/imports.py), compared with environments laid out on disk as the process
backend builds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldock.manager import files
from tooldock.manager.hints import written_hint
from tooldock.manager.imports import imported, missing_packages
from tooldock.manager.workspace import Workspace
from tooldock.runtime.backends.environments import READY_MARKER, Environments, environment_key

TOOL = '''import os
import json
import httpx
import yaml
from bs4 import BeautifulSoup
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import numpy
try:
    import orjson
except ImportError:
    orjson = None
from fastmcp.tools import tool
from . import sibling
import helpers.dates


@tool
def forecast(city: str) -> str:
    """The forecast for a city."""
    import humanize  # inside the function counts too
    return f"sunny in {city}"
'''

# What write_tool accepts: a top-level relative import cannot work in a tool file and is refused
# (test_validate.py), so the written file has a comment on its line (the line numbers stay).
WRITTEN = TOOL.replace("from . import sibling\n", "# from . import sibling: refused by write_tool\n")
assert WRITTEN != TOOL


def built(envs: Environments, requirements: str, *modules: str) -> None:
    """An environment as the process backend leaves it: its site-packages with `modules`, and the marker."""
    root = envs.root / environment_key(requirements, None)
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for module in modules:
        if module.endswith((".py", ".so")):
            (site / module).write_text("")
        else:
            (site / module).mkdir()
    (site / "fastmcp-4.1.2.dist-info").mkdir()
    (root / READY_MARKER).write_text("")


@pytest.fixture
def ns(tmp_path: Path) -> tuple[Workspace, Environments, Path]:
    ws = Workspace(tmp_path / "tools")
    files.create_namespace(ws, "weather")
    (ws.root / "weather" / "helpers").mkdir()
    return ws, Environments(tmp_path / "envs"), ws.root / "weather"


def test_what_a_file_imports_unguarded():
    assert imported(TOOL) == {"os": 1, "json": 2, "httpx": 3, "yaml": 4, "bs4": 5, "typing": 6, "fastmcp": 13,
                              "helpers": 15, "humanize": 21}
    assert imported("def broken(:\n") == {}
    guarded = "try:\n    import a\nexcept (ValueError, ModuleNotFoundError):\n    pass\nelse:\n    import b\n"
    assert imported(guarded) == {"b": 6}  # the else branch runs only when the import worked: not optional
    assert imported("try:\n    import a\nexcept KeyError:\n    pass\n") == {"a": 2}


def test_missing_packages_are_named_with_their_distribution(ns):
    ws, envs, folder = ns
    assert missing_packages(folder, "", None, envs) == []  # no environment built: nothing is guessed
    built(envs, "", "fastmcp", "yaml", "_yaml", "pydantic_core", "six.py")
    files.write_tool(ws, "weather", "forecast.py", WRITTEN)
    assert missing_packages(folder, "", None, envs) == [
        {"module": "httpx", "file": "forecast.py", "line": 3, "package": "httpx"},
        {"module": "bs4", "file": "forecast.py", "line": 5, "package": "beautifulsoup4"},
        {"module": "humanize", "file": "forecast.py", "line": 21, "package": "humanize"},
    ]


def test_requirements_not_installed_yet_leave_nothing_to_compare_with(ns):
    ws, envs, folder = ns
    built(envs, "", "fastmcp", "yaml")
    files.write_tool(ws, "weather", "forecast.py", WRITTEN)
    listed = "httpx>=0.28\nbeautifulsoup4==4.12.0\n"
    assert missing_packages(folder, listed, None, envs) == []  # what they provide is known once installed
    built(envs, listed, "fastmcp", "yaml", "httpx", "bs4")
    assert [m["module"] for m in missing_packages(folder, listed, None, envs)] == ["humanize"]


def test_write_tool_answers_with_the_packages_and_the_add_requirement_step(ns):
    ws, envs, _ = ns
    built(envs, "", "fastmcp")
    assert files.write_tool(ws, "weather", "forecast.py", WRITTEN)["written"]
    hint = written_hint(ws, "weather", containers=False, envs=envs)
    assert [m["module"] for m in hint["missing_packages"]] == ["httpx", "yaml", "bs4", "humanize"]
    assert hint["next_steps"][2] == (
        "forecast.py:5 imports bs4, which neither a file of weather nor its environment provides: if it is a "
        "package from the index, call add_requirement('weather', 'beautifulsoup4') (it installs at once), "
        "then reload_core()"
    )
    assert written_hint(ws, "weather", containers=False) == {}  # the docker backend: no environment to read
    files.write_tool(ws, "weather", "forecast.py", "from fastmcp.tools import tool\nimport helpers\n"
                     "@tool\ndef f(x: int) -> int:\n    \"\"\"x.\"\"\"\n    return x\n")
    assert written_hint(ws, "weather", containers=False, envs=envs) == {}


def test_a_requirements_file_that_cannot_be_read_leaves_the_hint_out_not_the_write(ns, tmp_path):
    ws, envs, folder = ns
    built(envs, "", "fastmcp")
    (tmp_path / "elsewhere.txt").write_text("httpx\n")
    (folder / "requirements.txt").symlink_to(tmp_path / "elsewhere.txt")
    assert files.write_tool(ws, "weather", "forecast.py", WRITTEN)["written"]
    assert "missing_packages" not in written_hint(ws, "weather", containers=False, envs=envs)


def test_code_nested_deeper_than_the_stack_is_read_as_far_as_it_goes():
    for terms in (900, 3000, 100_000):  # a chain of additions is one AST node inside the next
        deep = "import httpx\nx = " + "+".join(["1"] * terms) + "\n"
        assert imported(deep) in ({}, {"httpx": 1})  # never a RecursionError out of write_tool's hint
    nested = "".join("    " * i + "if x:\n" for i in range(15)) + "    " * 15 + "import yaml\n"
    assert imported(nested) == {"yaml": 16}
