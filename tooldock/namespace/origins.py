"""Where a tool file's decorators come from, read from its syntax tree (nothing is imported).

A file can show `@tool` and still serve nothing, which before showed only once a worker imported it:
- `tool` is never imported: a NameError at import;
- it is imported from a package that has no such decorator (`from tooldock import tool`,
  `from fastmcp import tool`): an ImportError;
- it belongs to the MCP SDK's own servers: `mcp.server.fastmcp` is SDK 1.x's (gone from SDK 2, which workers
  run), and `@server.tool()` on an SDK `MCPServer` registers the function on a server object ToolDock never
  runs, so the tool was silently not served.
Each is reported when the file is written or scanned, with the import to use instead. Only the packages
whose exports are known here are judged: a decorator imported from anything else (the user's helpers, a
library) is trusted, and a file whose imports the reading cannot follow (`import *`) is left alone.
"""

from __future__ import annotations

import ast

from tooldock.namespace.models import Problem

# fastmcp's standalone decorators, by the modules that export them (the first: the import to suggest).
PROVIDERS = {
    "tool": ("fastmcp.tools", "fastmcp.tools.function_tool"),
    "resource": ("fastmcp.resources", "fastmcp.resources.function_resource"),
    "prompt": ("fastmcp.prompts", "fastmcp.prompts.function_prompt"),
}
IMPORT_OF = {name: f"from {modules[0]} import {name}" for name, modules in PROVIDERS.items()}
TOOL_IMPORT = IMPORT_OF["tool"]
JUDGED = ("fastmcp", "mcp", "tooldock")  # packages whose exports are known here; other imports are trusted
SDK_V1 = "mcp.server.fastmcp"
SDK_SERVER_CLASSES = [(m, "MCPServer") for m in ("mcp.server", "mcp.server.mcpserver", "mcp.server.mcpserver.server")]

# A binding of a module-level name: (module, imported name) for `from module import name [as x]`, or None
# for anything else (an assignment, a def, `import x as name`): trusted.
Binding = tuple[str, str] | None


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


class Origins:
    """The names a file binds and, for the imported ones, where from."""

    def __init__(self, tree: ast.Module) -> None:
        self.bindings: dict[str, list[Binding]] = {}
        self.servers: dict[str, list[bool]] = {}  # name -> for each assignment: is it an SDK server object
        self.star = False
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                self.star |= any(a.name == "*" for a in node.names)
                for alias in node.names:
                    module = "." * node.level + (node.module or "")
                    self._bind(alias.asname or alias.name, (module, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    self._bind(alias.asname or alias.name.split(".")[0], None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._bind(node.name, None)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self._bind(node.id, None)
        for node in ast.walk(tree):  # once every import is known
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.servers.setdefault(target.id, []).append(self._is_sdk_server(node.value))

    def _bind(self, name: str, binding: Binding) -> None:
        self.bindings.setdefault(name, []).append(binding)

    def _is_sdk_server(self, value: ast.expr) -> bool:
        """`MCPServer(...)` (imported from the SDK) or `mcp.server.MCPServer(...)`."""
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        if isinstance(func, ast.Attribute):
            return func.attr == "MCPServer" and _in(ast.unparse(func.value), "mcp.server")
        if isinstance(func, ast.Name):
            found = self.bindings.get(func.id, [])
            return bool(found) and all(b in SDK_SERVER_CLASSES for b in found)
        return False

    def decorator_problem(self, filename: str, name: str, line: int) -> Problem | None:
        """Why `@name` (tool, resource or prompt) cannot work in this file, if it cannot."""
        found = self.bindings.get(name)
        fix = IMPORT_OF[name]
        if not found:
            if self.star:
                return None
            return Problem(
                filename, f"'{name}' is not defined; add '{fix}' at the top of the file", line, "undefined_decorator"
            )
        wrong = [b for b in found if b is not None and b[0].split(".")[0] in JUDGED and b[0] not in PROVIDERS[name]]
        if len(wrong) < len(found):
            return None
        module, imported = wrong[0]
        what = (
            f"'{module}' has no @{name} decorator"
            if imported == name
            else f"'{name}' is '{module}.{imported}', not fastmcp's @{name}"
        )
        return Problem(filename, f"{what}; use '{fix}'", line, "wrong_import")

    def sdk_server_problem(
        self, filename: str, fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: str
    ) -> Problem | None:
        """A tool decorated by `@owner.tool(...)` where `owner` is an MCP SDK server object: never served."""
        found = self.servers.get(owner)
        if not found or not all(found) or len(self.bindings.get(owner, ())) != len(found):
            return None
        return Problem(
            filename,
            f"tool {fn.name!r} is registered on {owner!r}, an MCP SDK MCPServer, which ToolDock does not run; "
            f"decorate the function with '@tool' ({TOOL_IMPORT}) instead (no server object is needed)",
            fn.lineno,
            "sdk_server",
        )


def sdk_v1_import(filename: str, tree: ast.Module) -> Problem | None:
    """A top-level import of `mcp.server.fastmcp`: SDK 1.x's server, which does not exist in SDK 2 (the one
    workers run), so the file cannot import. One inside `try:` (a fallback) is left alone."""
    for node in tree.body:
        modules = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else []
        )
        if any(_in(m, SDK_V1) for m in modules):
            return Problem(
                filename,
                f"'{SDK_V1}' is the MCP SDK 1.x's FastMCP, which ToolDock's workers do not have (they run fastmcp "
                f"on the MCP SDK 2): drop the server object and decorate module-level functions with '@tool' "
                f"({TOOL_IMPORT})",
                node.lineno,
                "sdk_server",
            )
    return None


def relative_import(filename: str, tree: ast.Module) -> Problem | None:
    """A top-level relative import (`from . import helpers`): a tool file is imported on its own, as a
    top-level module, not as part of a package, so the import fails. One inside `try:` (a fallback) is left
    alone."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            names = ", ".join(a.name for a in node.names)
            absolute = f"from {node.module} import {names}" if node.module else f"import {names}"
            return Problem(
                filename,
                f"relative import '{ast.unparse(node)}': a tool file is imported on its own, not as part of a "
                f"package, so it fails; import by name instead ('{absolute}': the namespace folder is on the "
                "import path)",
                node.lineno,
                "import_error",
            )
    return None
