"""Import a namespace's tool files and describe their tools: the one place that imports fastmcp.

Runs only inside a worker's environment (a worker process, or a build step with the locked
dependencies), never in the gateway: importing a tool file executes user code.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from fastmcp.tools import Tool

from .models import Problem

# The fields of an MCP `Tool` that ToolDock pre-extracts and serves (seed 000, "Tools method compliance").
DESCRIPTOR_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons")


@dataclass
class LoadedNamespace:
    tools: dict[str, Tool] = field(default_factory=dict)
    descriptors: list[dict[str, Any]] = field(default_factory=list)
    failed: list[Problem] = field(default_factory=list)


def describe(tool: Tool) -> dict[str, Any]:
    """The tool as MCP `tools/list` shows it, minus fastmcp's private `_meta`."""
    data = tool.to_mcp_tool().model_dump(mode="json", by_alias=True, exclude_none=True)
    return {key: data[key] for key in DESCRIPTOR_FIELDS if key in data}


def _import_file(path: Path) -> ModuleType:
    # Plain module names (the file stem) so tool files can import each other and their `_helpers.py`.
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(path.stem, None)
        raise
    return module


def _line_of(exc: BaseException, path: Path) -> int | None:
    if isinstance(exc, SyntaxError):
        return exc.lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return frames[-1].lineno if frames else None


def _import_problem(path: Path, exc: BaseException) -> Problem:
    line = _line_of(exc, path)
    if isinstance(exc, ModuleNotFoundError):
        return Problem(
            path.name,
            f"import failed: {exc}; add the package to the namespace's requirements.txt",
            line,
            "dependency_error",
        )
    return Problem(path.name, f"import failed: {type(exc).__name__}: {exc}", line, "import_error")


def load_namespace(folder: Path, filenames: Iterable[str]) -> LoadedNamespace:
    """Import each file and build its tools; a file that fails is reported and the rest still load."""
    folder = folder.resolve()
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    loaded = LoadedNamespace()
    for filename in filenames:
        path = folder / filename
        try:
            module = _import_file(path)
        except Exception as exc:  # user code: anything may be raised at import time
            loaded.failed.append(_import_problem(path, exc))
            continue
        for obj in list(vars(module).values()):
            if getattr(obj, "__module__", None) != module.__name__ or not hasattr(obj, "__fastmcp__"):
                continue
            try:
                tool = Tool.from_function(obj)
            except Exception as exc:  # fastmcp rejects some signatures; report which
                line = getattr(getattr(obj, "__code__", None), "co_firstlineno", None)
                loaded.failed.append(Problem(path.name, f"invalid tool: {exc}", line, "invalid_tool"))
                continue
            if tool.name in loaded.tools:
                loaded.failed.append(
                    Problem(path.name, f"duplicate tool name {tool.name!r}", None, "duplicate_tool")
                )
                continue
            loaded.tools[tool.name] = tool
            loaded.descriptors.append(describe(tool))
    return loaded
