"""Python names across a repository, read with `ast` (never imported, never run): string constants, enum
members and pydantic-style model classes, so a tool named `TimeTools.GET_CURRENT_TIME.value` or described by
`FETCH_TOOL_DESCRIPTION` or taking `GitStatus.model_json_schema()` resolves to what the server would say."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


@dataclass
class Module:
    rel: str
    tree: ast.Module
    names: dict[str, ast.expr] = field(default_factory=dict)  # module-level first, then nested assignments
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    nodes: list[ast.AST] = field(default_factory=list)  # every node, walked once


def index_module(rel: str, tree: ast.Module) -> Module:
    mod = Module(rel, tree, nodes=list(ast.walk(tree)))
    nested: dict[str, ast.expr] = {}
    for node in mod.nodes:
        if isinstance(node, ast.ClassDef):
            mod.classes.setdefault(node.name, node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mod.functions.setdefault(node.name, node)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            nested.setdefault(node.targets[0].id, node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            nested.setdefault(node.target.id, node.value)
    for stmt in tree.body:  # module-level assignments win over same-named locals
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            mod.names[stmt.targets[0].id] = stmt.value
    for name, value in nested.items():
        mod.names.setdefault(name, value)
    return mod


@dataclass
class PyIndex:
    """Every module of the tree; lookups try the module itself first, then any other module (the first
    that defines the name, in the order the modules were added)."""

    modules: dict[str, Module] = field(default_factory=dict)
    _names: dict[str, Module] = field(default_factory=dict)
    _classes: dict[str, Module] = field(default_factory=dict)

    def add(self, mod: Module) -> None:
        self.modules[mod.rel] = mod
        for name in mod.names:
            self._names.setdefault(name, mod)
        for name in mod.classes:
            self._classes.setdefault(name, mod)

    def name(self, mod: Module, name: str) -> tuple[Module, ast.expr] | None:
        where = mod if name in mod.names else self._names.get(name)
        return (where, where.names[name]) if where is not None else None

    def cls(self, mod: Module, name: str) -> tuple[Module, ast.ClassDef] | None:
        where = mod if name in mod.classes else self._classes.get(name)
        return (where, where.classes[name]) if where is not None else None

    def function(self, mod: Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        return mod.functions.get(name)

    def eval(self, mod: Module, node: ast.AST | None, depth: int = 0) -> Any:
        """The value of a literal-ish expression: constants, f-strings (unknown parts kept as `{expr}`),
        `+` of strings, dicts, lists, names of constants and enum members; UNKNOWN otherwise."""
        if node is None or depth > 20:
            return UNKNOWN
        d = depth + 1
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                elif isinstance(value, ast.FormattedValue):
                    inner = self.eval(mod, value.value, d)
                    parts.append(inner if isinstance(inner, str) else "{" + ast.unparse(value.value) + "}")
            return "".join(parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.eval(mod, node.left, d), self.eval(mod, node.right, d)
            return left + right if isinstance(left, str) and isinstance(right, str) else UNKNOWN
        if isinstance(node, ast.Dict):
            return {
                self.eval(mod, k, d): self.eval(mod, v, d)
                for k, v in zip(node.keys, node.values, strict=True)
                if k is not None and isinstance(self.eval(mod, k, d), str)
            }
        if isinstance(node, ast.List | ast.Tuple):
            return [self.eval(mod, e, d) for e in node.elts]
        if isinstance(node, ast.Name):
            found = self.name(mod, node.id)
            return self.eval(found[0], found[1], d) if found else UNKNOWN
        if isinstance(node, ast.Attribute):
            return self._attribute(mod, node, d)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
            return self.eval(mod, node.args[0], d)
        return UNKNOWN

    def _attribute(self, mod: Module, node: ast.Attribute, depth: int) -> Any:
        # `Enum.MEMBER.value`, `Enum.MEMBER` (a str enum is its value), `module.CONSTANT`
        target = node.value if node.attr in ("value", "name") else node
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            found = self.cls(mod, target.value.id)
            if found:
                for stmt in found[1].body:
                    if isinstance(stmt, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == target.attr for t in stmt.targets
                    ):
                        return target.attr if node.attr == "name" else self.eval(found[0], stmt.value, depth)
            found_name = self.name(mod, target.attr)
            if found_name and target is node:
                return self.eval(found_name[0], found_name[1], depth)
        return UNKNOWN


def enum_values(cls: ast.ClassDef) -> list[Any] | None:
    """The member values of `class X(str, Enum)` / `(Enum)` / `(StrEnum)`; None for other classes."""
    bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in cls.bases}
    if not bases & {"Enum", "StrEnum", "IntEnum"}:
        return None
    out = []
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            out.append(stmt.value.value)
    return out


def docstring_args(doc: str) -> dict[str, str]:
    """Parameter descriptions from a docstring: Google (`Args:` / `name (type): text`), Sphinx
    (`:param name: text`) and NumPy (`Parameters` / `----------` / `name : type` + indented text)."""
    out: dict[str, str] = {}
    lines = doc.splitlines()
    section, current, indent = False, None, 0
    for i, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith(":param "):
            head, _, text = line[7:].partition(":")
            out[head.split()[-1]] = text.strip()
            continue
        if line in ("Args:", "Arguments:", "Parameters:", "Params:") or (
            line == "Parameters" and i + 1 < len(lines) and lines[i + 1].strip().startswith("---")
        ):
            section, current, indent = True, None, len(raw) - len(raw.lstrip())
            continue
        if not section or line.startswith("---"):
            continue
        here = len(raw) - len(raw.lstrip())
        if not line:
            continue
        if here <= indent and line.endswith(":"):  # the next section (Returns:, Raises:)
            section = False
            continue
        name, sep, text = line.partition(":")
        key = name.split("(")[0].strip()
        if sep and key.isidentifier() and (current is None or here <= current[1]):
            current = (key, here)
            out[key] = text.strip() if "(" in name or text.strip() else ""
            if " : " in line:  # NumPy: `name : type`, the text follows indented
                out[key] = ""
        elif current:
            out[current[0]] = (out[current[0]] + " " + line).strip()
    return out
