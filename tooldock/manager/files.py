"""Namespaces and tool files on disk: create, list, read, validate-then-write, delete (seed 000, "Namespace
Management" and "Tool File Management"). Plain functions over a `Workspace`; nothing here talks to the
gateway. Every refusal is a `ManagerError` whose message says what to do instead.
"""

from __future__ import annotations

import ast
import os
import shutil
import tempfile
from typing import Any

from tooldock.errors import AlreadyExists, InvalidInput, Missing
from tooldock.manager.workspace import Workspace, atomic_write, decode_code
from tooldock.namespace.credentials import WRITTEN, written_credentials
from tooldock.namespace.models import problem_text
from tooldock.namespace.names import tool_name_warning
from tooldock.namespace.scanner import MAX_TOOL_FILE_BYTES
from tooldock.namespace.validate import decorator_tool_name, given_description, literal_text, validate_source


def create_namespace(ws: Workspace, name: object) -> dict[str, Any]:
    folder = ws.namespace_dir(name, must_exist=False)
    if folder.exists():
        raise AlreadyExists(
            f"namespace {folder.name!r} already exists at {folder}; write tools into it, or choose another name",
            {"path": str(folder)},
        )
    ws.root.mkdir(parents=True, exist_ok=True)
    folder.mkdir()
    return {"created": True, "path": str(folder)}


def delete_namespace(ws: Workspace, name: object) -> dict[str, Any]:
    folder = ws.namespace_dir(name)
    # Renamed away first (dot-folders are never namespaces), so a scan never sees it half deleted.
    doomed = tempfile.mkdtemp(prefix=f".deleting-{folder.name}-", dir=ws.root)
    os.rmdir(doomed)
    os.replace(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)
    return {"deleted": True, "name": folder.name}


def _description(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The first paragraph of the tool's description: `@tool(description="...")`'s, else its docstring's."""
    doc = literal_text(given_description(fn)) or ast.get_docstring(fn) or ""
    return doc.split("\n\n", 1)[0].strip()


def tools_in(source: str) -> list[tuple[str, str]]:
    """(tool name, first paragraph of its description) of each module-level `@tool` function, read without importing."""
    return [(name, description) for name, description, _ in _tool_nodes(source)]


def _tool_nodes(source: str) -> list[tuple[str, str, tuple[int, int]]]:
    """`tools_in`, with the lines each tool's function spans (its decorators included)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # validate.py reports why
        return []
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [n for n in (decorator_tool_name(d, node.name) for d in node.decorator_list) if n]
            if names:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append((names[0], _description(node), (first, node.end_lineno or node.lineno)))
    return found


def _read(path: Any) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a leading BOM, as Python reads it, is no character
    except UnicodeDecodeError:
        raise InvalidInput(f"{path.name} is not valid UTF-8 text; rewrite it with write_tool") from None


def list_tools(ws: Workspace, namespace: object, status: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each tool of the namespace's files; with the gateway's `/namespaces` entry for it (`status`), also
    `served` (the gateway lists the tool) and, when something keeps it from being served, its `problem`:
    a problem in the tool's own lines (no docstring, a parameter without a type hint) is that tool's only;
    one elsewhere in the file (an import that failed) is every tool's of the file."""
    listed = []
    served = set((status or {}).get("tools") or [])
    for path in ws.tool_files(namespace):
        try:
            source = _read(path)
        except InvalidInput:
            continue
        nodes = _tool_nodes(source)
        problems = _problems_by_tool(path.name, status, {name: lines for name, _, lines in nodes})
        for name, description, _ in nodes:
            entry: dict[str, Any] = {"name": name, "description": description, "filename": path.name}
            if status is not None:
                entry["served"] = name in served
                problem = problems.get(name) or problems.get(None)
                if problem:
                    entry["problem"] = problem
            listed.append(entry)
    return listed


def _problems_by_tool(
    filename: str, status: dict[str, Any] | None, spans: dict[str, tuple[int, int]]
) -> dict[str | None, str]:
    """The first problem the gateway reports in each tool's lines, and under None the file's first other."""
    found: dict[str | None, str] = {}
    for problem in (status or {}).get("problems") or []:
        if not isinstance(problem, dict) or problem.get("file") != filename:
            continue
        line = problem.get("line") if isinstance(problem.get("line"), int) else None
        owner = next((name for name, (a, b) in spans.items() if line is not None and a <= line <= b), None)
        found.setdefault(owner, f"{problem.get('message')}" + (f" (line {line})" if line else ""))
    return found


def problems_of(status: dict[str, Any]) -> dict[str, Any]:
    """`{"problems": ["file:line: message", ...]}` from the gateway's `/namespaces` entry; `{}` when none."""
    listed = [problem_text(p) for p in status.get("problems") or [] if isinstance(p, dict) and p.get("file")]
    if status.get("state") == "failed" and status.get("last_error") and not listed:
        listed.append(str(status["last_error"]))
    return {"problems": listed} if listed else {}


def get_tool_source(ws: Workspace, namespace: object, filename: object) -> dict[str, Any]:
    path = ws.tool_file(namespace, filename)
    if not path.is_file():
        files = ", ".join(p.name for p in ws.tool_files(path.parent.name)) or "none"
        raise Missing(f"no file {path.name!r} in namespace {path.parent.name!r} (files: {files}); see list_tools")
    if path.stat().st_size > MAX_TOOL_FILE_BYTES:
        raise InvalidInput(
            f"{path.name} is larger than {MAX_TOOL_FILE_BYTES} bytes, too large for a tool file; "
            "rewrite it with write_tool or delete it with delete_tool"
        )
    return {"filename": path.name, "source": _read(path)}


def check_tool_code(ws: Workspace, namespace: str, filename: str, code: str) -> dict[str, Any] | None:
    """None when the file may be written; else the seed's `{"written": false, "error", "details"}` answer with
    every problem and its line."""
    report = validate_source(filename, code)
    problems = [p.to_dict() for p in report.problems]
    if not problems:
        others: dict[str, str] = {}
        for path in ws.tool_files(namespace):
            if path.name != filename and path.stat().st_size <= MAX_TOOL_FILE_BYTES:
                try:
                    others.update({name: path.name for name, _ in tools_in(_read(path))})
                except InvalidInput:
                    continue
        problems = [
            {
                "file": filename,
                "line": None,
                "code": "duplicate_tool",
                "message": f"tool {name!r} is already defined in {others[name]}; "
                "rename it (tool names are unique per namespace) or edit that file instead",
            }
            for name in report.tools
            if name in others
        ]
    problems = _credentials(filename, code, namespace) + problems  # the first to fix: never written
    if not problems:
        return None
    lines = [f"line {p['line']}: {p['message']}" if p["line"] else p["message"] for p in problems]
    first = problems[0]["code"]
    headline = {
        "syntax_error": "Syntax error",
        "no_tools": "No @tool decorator found",
        "missing_type_hint": "Missing type hints",
        "missing_docstring": "Missing docstring",
        "duplicate_tool": "Duplicate tool name",
        "wrong_import": "@tool is imported from the wrong place",
        "undefined_decorator": "@tool is not imported",
        "sdk_server": "MCP SDK server object instead of @tool",
        "hardcoded_secret": "A secret is written into the code",
        "auth_check": "An auth= check ToolDock cannot apply",
    }.get(first, "Invalid tool file")
    return {"written": False, "error": headline, "details": "\n".join(lines), "problems": problems}


def write_tool(ws: Workspace, namespace: object, filename: object, code: object) -> dict[str, Any]:
    path = ws.tool_file(namespace, filename)
    ws.refuse_upstream(namespace, "a tool file")
    text = decode_code(code)
    refused = check_tool_code(ws, path.parent.name, path.name, text)
    if refused is not None:
        return refused
    atomic_write(path, text.encode("utf-8"))
    found = [name for name, _ in tools_in(text)]
    result: dict[str, Any] = {"written": True, "filename": path.name, "tools_found": found}
    warnings = [w for w in map(tool_name_warning, found) if w]
    if warnings:  # served, as fastmcp serves them, but clients may refuse them: worth renaming now
        result["name_warnings"] = warnings
    return result


def delete_tool(ws: Workspace, namespace: object, filename: object) -> dict[str, Any]:
    path = ws.tool_file(namespace, filename)
    if not path.is_file():
        raise Missing(f"no file {path.name!r} in namespace {path.parent.name!r}; see list_tools")
    path.unlink()
    return {"deleted": True, "filename": path.name}


def _credentials(filename: str, code: str, namespace: str) -> list[dict[str, Any]]:
    """`hardcoded_secret` problems, told to an LLM: read the value from the environment, then prepare_secret
    (the value never passes through the chat again). Never the value itself."""
    return [
        {
            "file": filename,
            "line": found.line,
            "code": "hardcoded_secret",
            "message": (
                f"{WRITTEN.format(kind=found.kind)}. Read it from the environment instead, os.environ[{found.name!r}], "
                f"then call prepare_secret(key={found.name!r}, namespace={namespace!r}), which declares it, and ask "
                "the user to set its value with the command it gives (never paste a secret into the chat)"
            ),
        }
        for found in written_credentials(code)
    ]
