"""Static checks on one tool file, by reading its syntax tree; nothing is imported or executed.

The rules (seed 000, `write_tool`): valid Python, at least one `@tool` function, a type hint on every
parameter, a docstring on every tool (or its `@tool(description=...)`, which fastmcp takes instead);
ToolDock adds a decorator that really is fastmcp's (`origins`).
Problems come back as data so one bad file never stops the others, and one bad tool never stops the other
tools of its file: it is listed in `skipped` and not served.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from tooldock.namespace.models import Problem
from tooldock.namespace.origins import PROVIDERS, Origins, relative_import, sdk_v1_import


@dataclass(frozen=True)
class FileReport:
    tools: tuple[str, ...]  # the tools the file serves: its @tool functions without problems
    problems: tuple[Problem, ...]
    others: int = 0  # @resource and @prompt functions: served over MCP, need no type-hint rules
    skipped: tuple[str, ...] = ()  # the module-level names of @tool functions with problems: not served
    functions: tuple[tuple[str, int], ...] = ()  # the served tools' module-level names and lines
    versioned: tuple[str, ...] = ()  # served tool names given with `version=` (fastmcp serves the highest)

    @property
    def ok(self) -> bool:
        """Whether the file loads: it serves something (a file-wide problem, such as a syntax error, serves
        nothing)."""
        return bool(self.tools or self.others)


def _target(dec: ast.expr) -> ast.expr:
    """What a decorator names: `tool` in `@tool(...)`, `x.tool` in `@x.tool`."""
    return dec.func if isinstance(dec, ast.Call) else dec


def _decorator_name(dec: ast.expr) -> str:
    """`tool` for `@tool`, `@x.tool`, `@tool(...)` or `@x.tool(...)`; likewise for any decorator."""
    target = _target(dec)
    return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else ""


def _is_component(dec: ast.expr) -> bool:
    """`@resource(...)` or `@prompt` (plain, called, or as an attribute such as `@mcp.prompt`)."""
    return _decorator_name(dec) in ("resource", "prompt")


def decorator_tool_name(dec: ast.expr, fn_name: str) -> str | None:
    """The tool name if `dec` is `@tool`, `@x.tool`, `@tool(...)` or `@x.tool(...)`, else None. An empty
    name given is no name: fastmcp names the tool after its function then."""
    if _decorator_name(dec) != "tool":
        return None
    if isinstance(dec, ast.Call):
        if dec.args and isinstance(dec.args[0], ast.Constant) and isinstance(dec.args[0].value, str):
            return dec.args[0].value or fn_name
        for kw in dec.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                return kw.value.value or fn_name
    return fn_name


def _param_problems(filename: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Problem]:
    problems = []
    args = fn.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.annotation is None:
            problems.append(
                Problem(
                    filename,
                    f"tool {fn.name!r}: parameter {arg.arg!r} has no type hint; add one, e.g. '{arg.arg}: str'",
                    arg.lineno,
                    "missing_type_hint",
                )
            )
    for stars, star in (("*", args.vararg), ("**", args.kwarg)):
        if star is not None:
            problems.append(
                Problem(
                    filename,
                    f"tool {fn.name!r}: a {stars}{star.arg} parameter is not supported (a tool's parameters are "
                    "its input schema); declare each parameter explicitly",
                    star.lineno,
                    "unsupported_parameter",
                )
            )
    return problems


TOO_DEEP = (
    "the file is nested too deeply to read (an expression or block thousands of levels deep, beyond Python's "
    "own limit): split it into smaller statements"
)


def validate_source(filename: str, source: str) -> FileReport:
    try:
        return _validate(filename, source)
    except (RecursionError, MemoryError):  # Python cannot compile it either: the worker would fail to import it
        return FileReport((), (Problem(filename, TOO_DEEP, None, "syntax_error"),))


def _validate(filename: str, source: str) -> FileReport:
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return FileReport((), (Problem(filename, f"syntax error: {exc.msg}", exc.lineno, "syntax_error"),))
    except ValueError as exc:  # e.g. null bytes in the source
        return FileReport((), (Problem(filename, f"cannot parse file: {exc}", None, "syntax_error"),))

    unimportable = sdk_v1_import(filename, tree) or relative_import(filename, tree)
    if unimportable is not None:  # the file cannot import at all
        return FileReport((), (unimportable,))
    origins = Origins(tree)
    tools: list[str] = []
    functions: list[tuple[str, int]] = []
    skipped: list[str] = []
    problems: list[Problem] = []
    lines: dict[str, int] = {}  # served tool name -> its line
    versioned: set[str] = set()
    others = 0
    for node in tree.body:  # only module-level functions are importable tools
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in node.decorator_list:  # `@tool` with no such decorator behind it: the file cannot import
            wrong = _origin_problem(origins, filename, dec)
            if wrong is not None:
                return FileReport((), (wrong,))
        names = [n for n in (decorator_tool_name(d, node.name) for d in node.decorator_list) if n]
        if not names:
            others += any(_is_component(d) for d in node.decorator_list)
            continue
        own = _param_problems(filename, node)
        own.extend(p for p in (_server_problem(origins, filename, node, d) for d in node.decorator_list) if p)
        own.extend(p for p in (_auth_problem(filename, node),) if p)
        is_versioned = any(_versioned(d) for d in node.decorator_list)
        if names[0] in lines and not (is_versioned and names[0] in versioned):
            own.append(
                Problem(
                    filename,
                    f"duplicate tool name {names[0]!r} (also at line {lines[names[0]]}): rename one (tool names "
                    "are unique per namespace), or give each a different version=... (the highest is served)",
                    node.lineno,
                    "duplicate_tool",
                )
            )
        if not ast.get_docstring(node) and not _described(node):
            own.append(
                Problem(
                    filename,
                    f"tool {node.name!r} has no docstring; add one that says what the tool does "
                    "(it becomes the tool's description), or give it as @tool(description=...)",
                    node.lineno,
                    "missing_docstring",
                )
            )
        if own:
            skipped.append(node.name)
            problems.extend(own)
        elif names[0] not in lines:
            tools.append(names[0])
            functions.append((node.name, node.lineno))
            lines[names[0]] = node.lineno
            if is_versioned:
                versioned.add(names[0])
    if not tools and not others and not skipped:
        problems.append(
            Problem(
                filename,
                "no @tool function found; decorate at least one module-level function with "
                "'@tool' (from fastmcp.tools import tool), or '@resource' / '@prompt' for MCP resources and prompts",
                None,
                "no_tools",
            )
        )
    return FileReport(tuple(tools), tuple(problems), others, tuple(skipped), tuple(functions), tuple(sorted(versioned)))


def given_description(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    """The `description=...` the function's `@tool(...)` gives (fastmcp takes it instead of the docstring)."""
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and _decorator_name(dec) == "tool":
            for keyword in dec.keywords:
                if keyword.arg == "description":
                    return keyword.value
    return None


def literal_text(value: ast.expr | None) -> str | None:
    """`value` when it is a string literal with some text in it, else None."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.strip():
        return value.value
    return None


def _described(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `@tool(description=...)` describes the tool: a description that is not left empty. A value
    computed at import time (a name, an f-string) counts: it cannot be read here."""
    given = given_description(fn)
    return given is not None and (not isinstance(given, ast.Constant) or literal_text(given) is not None)


# fastmcp's `auth=` checks read the OAuth token of a request to FastMCP's own server; behind the gateway there
# is none (callers present ToolDock's API keys), so FastMCP would hide such a component from every caller.
# Serving it to everyone instead would drop the author's restriction unsaid: it is not served, and says so
# (here for `@tool(auth=...)` as written; extract.py for any component that importing gives an auth check).
AUTH_CHECK = (
    "{kind} {name!r} has an authorization check (auth=...), which ToolDock cannot apply: callers authenticate "
    "to the gateway with its API keys, not with an OAuth token to the tool's server, so it is not served (as "
    "FastMCP hides it from a caller without a token); remove auth= and limit who may reach it with API key "
    "scopes (tooldock keys create --namespace GLOB --tool GLOB ...)"
)


def _auth_problem(filename: str, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Problem | None:
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and _decorator_name(dec) == "tool" and any(k.arg == "auth" for k in dec.keywords):
            return Problem(filename, AUTH_CHECK.format(kind="tool", name=fn.name), fn.lineno, "auth_check")
    return None


def _versioned(dec: ast.expr) -> bool:
    """`@tool(..., version=...)`: one version of a tool; fastmcp serves the highest of a name's versions."""
    return (
        isinstance(dec, ast.Call) and _decorator_name(dec) == "tool" and any(k.arg == "version" for k in dec.keywords)
    )


def _origin_problem(origins: Origins, filename: str, dec: ast.expr) -> Problem | None:
    target = _target(dec)
    if isinstance(target, ast.Name) and target.id in PROVIDERS:
        return origins.decorator_problem(filename, target.id, dec.lineno)
    return None


def _server_problem(
    origins: Origins, filename: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, dec: ast.expr
) -> Problem | None:
    target = _target(dec)
    if isinstance(target, ast.Attribute) and target.attr == "tool" and isinstance(target.value, ast.Name):
        return origins.sdk_server_problem(filename, fn, target.value.id)
    return None
