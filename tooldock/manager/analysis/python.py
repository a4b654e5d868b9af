"""Python servers, read with `ast`: `@mcp.tool()` / `@server.tool(name=..., description=...)` / `@tool`
functions (FastMCP, the SDK's MCPServer and FastMCP, ToolDock), `server.add_tool(fn, ...)`, and low-level
`@server.list_tools()` handlers returning `Tool(name=..., inputSchema=...)` tables; plus the environment
variables the code reads and the hosts of URL literals."""

from __future__ import annotations

import ast
import inspect
from typing import Any

from tooldock.manager.analysis.facts import Facts, env_name, schema_params, tool, url_host
from tooldock.manager.analysis.pyscope import UNKNOWN, Module, PyIndex, docstring_args, index_module
from tooldock.manager.analysis.pytypes import build_param, model_params
from tooldock.manager.analysis.walk import SourceFile

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
SKIPPED_ARGS = {"self", "cls"}


def _callee(node: ast.AST) -> tuple[ast.AST, str]:
    """(the decorator's callable, its last name): `@mcp.tool()` -> (mcp.tool, "tool")."""
    func = node.func if isinstance(node, ast.Call) else node
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return func, name


def _kwargs(index: PyIndex, mod: Module, call: ast.AST) -> dict[str, Any]:
    if not isinstance(call, ast.Call):
        return {}
    return {kw.arg: index.eval(mod, kw.value) for kw in call.keywords if kw.arg}


def function_params(index: PyIndex, mod: Module, fn: FunctionNode, doc: str) -> list[dict[str, Any]]:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults, strict=True)) + list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    described = docstring_args(doc)
    out = []
    for i, (arg, default) in enumerate(pairs):
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if (i == 0 and arg.arg in SKIPPED_ARGS) or "Context" in annotation or "ServerSession" in annotation:
            continue
        out.append(build_param(index, mod, arg.arg, arg.annotation, default, described))
    return out


def _decorated_tool(index: PyIndex, mod: Module, fn: FunctionNode, deco: ast.expr) -> dict[str, Any]:
    kwargs = _kwargs(index, mod, deco)
    name = kwargs.get("name")
    if not isinstance(name, str) and isinstance(deco, ast.Call) and deco.args:
        first = index.eval(mod, deco.args[0])  # FastMCP: @mcp.tool("name")
        name = first if isinstance(first, str) else None
    doc = inspect.cleandoc(ast.get_docstring(fn, clean=False) or "")
    description = kwargs.get("description")
    return tool(
        name if isinstance(name, str) else fn.name,
        mod.rel,
        description if isinstance(description, str) else doc,
        function_params(index, mod, fn, doc),
        line=fn.lineno,
    )


def _input_schema(index: PyIndex, mod: Module, node: ast.AST | None) -> list[dict[str, Any]] | None:
    """`Model.model_json_schema()` / `Model.schema()` -> the model's fields; a dict literal -> its properties."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("model_json_schema", "schema")
        and isinstance(node.func.value, ast.Name)
    ):
        return model_params(index, mod, node.func.value.id)
    return schema_params(index.eval(mod, node))


def _table_tools(index: PyIndex, mod: Module, fn: FunctionNode) -> list[dict[str, Any]]:
    """`Tool(name=..., description=..., inputSchema=...)` calls in a list_tools handler or in the module-level
    values it refers to."""
    roots: list[ast.AST] = [fn]
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in mod.names and isinstance(mod.names[node.id], ast.List):
            roots.append(mod.names[node.id])
    out, seen = [], set()
    for root in roots:
        for node in ast.walk(root):
            if not (isinstance(node, ast.Call) and _callee(node)[1] == "Tool") or id(node) in seen:
                continue
            seen.add(id(node))
            keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            name = index.eval(mod, keywords.get("name"))
            if not isinstance(name, str):
                continue
            description = index.eval(mod, keywords.get("description"))
            params = _input_schema(index, mod, keywords.get("inputSchema") or keywords.get("input_schema"))
            out.append(
                tool(name, mod.rel, description if isinstance(description, str) else "", params or [], line=node.lineno)
            )
    return out


def _tools(index: PyIndex, mod: Module) -> list[dict[str, Any]]:
    out = []
    for node in mod.nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                func, name = _callee(deco)
                if name == "tool":
                    out.append(_decorated_tool(index, mod, node, deco))
                elif name == "list_tools" and isinstance(func, ast.Attribute):
                    out += _table_tools(index, mod, node)
        elif isinstance(node, ast.Call) and _callee(node)[1] == "add_tool" and node.args:
            target = node.args[0]  # server.add_tool(fn, name=..., description=...)
            fn = index.function(mod, target.id) if isinstance(target, ast.Name) else None
            if fn is not None:
                out.append(_decorated_tool(index, mod, fn, node))
    return out


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _env_read(index: PyIndex, mod: Module, node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        last = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if last not in ("getenv", "get"):
            return None
        func = ast.unparse(node.func)
        if func in ("os.getenv", "getenv", "os.environ.get", "environ.get") and node.args:
            return env_name(index.eval(mod, node.args[0]))
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return env_name(index.eval(mod, node.slice))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
        if _is_environ(node.comparators[0]):
            return env_name(index.eval(mod, node.left))
    return None


def _not_requests(mod: Module) -> set[int]:
    """Strings that are never a request: bare string statements (docstrings included), and the parts of
    f-strings (judged with their f-string)."""
    ids = set()
    for node in mod.nodes:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant | ast.JoinedStr):
            ids.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            ids.update(id(v) for v in node.values)
    return ids


def file_facts(index: PyIndex, mod: Module, with_tools: bool) -> Facts:
    facts = Facts(tools=_tools(index, mod) if with_tools else [])
    skip = _not_requests(mod)
    for node in mod.nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for top in (n.split(".")[0] for n in names):
                if top == "fastmcp":
                    facts.frameworks.add("fastmcp")
                elif top == "mcp":
                    facts.frameworks.add("mcp-python")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            host = url_host(node.value)
            if host:
                facts.hosts.add(host)
        elif isinstance(node, ast.JoinedStr) and id(node) not in skip and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                host = url_host(first.value)
                if host and "/" in first.value[8:]:  # `f"https://{host}/..."` names no host
                    facts.hosts.add(host)
        name = _env_read(index, mod, node)
        if name:
            facts.env.add(name)
    return facts


def analyze_python(sources: list[tuple[SourceFile, str]]) -> dict[str, Facts]:
    """Facts per file (tools only from non-test files). Files that do not parse are left out."""
    index = PyIndex()
    for src, text in sources:
        try:
            index.add(index_module(src.rel, ast.parse(text, filename=src.rel)))
        except (SyntaxError, ValueError, RecursionError):
            continue
    tests = {src.rel for src, _ in sources if src.is_test}
    return {rel: file_facts(index, mod, rel not in tests) for rel, mod in index.modules.items()}


__all__ = ["UNKNOWN", "analyze_python"]
