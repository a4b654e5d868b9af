"""Python annotations and pydantic models as tool parameters: `str` -> string, `int | None` -> integer,
`Annotated[str, Field(description=...)]`, `Literal[...]` and enums -> string with `enum`, models defined in
the repository -> their fields (bases included), `Field(alias=...)` names, defaults and `default_factory`."""

from __future__ import annotations

import ast
from typing import Any

from tooldock.manager.analysis.facts import param
from tooldock.manager.analysis.pyscope import UNKNOWN, Module, PyIndex, enum_values

SIMPLE = {
    "str": "string",
    "bytes": "string",
    "AnyUrl": "string",
    "HttpUrl": "string",
    "AnyHttpUrl": "string",
    "EmailStr": "string",
    "Path": "string",
    "UUID": "string",
    "datetime": "string",
    "date": "string",
    "time": "string",
    "int": "integer",
    "float": "number",
    "Decimal": "number",
    "bool": "boolean",
    "list": "array",
    "List": "array",
    "tuple": "array",
    "Tuple": "array",
    "set": "array",
    "Set": "array",
    "frozenset": "array",
    "Sequence": "array",
    "Iterable": "array",
    "dict": "object",
    "Dict": "object",
    "Mapping": "object",
    "Any": "any",
    "None": "null",
}
OPTIONAL = {"Optional", "Union"}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a forward reference
        return node.value.split("[")[0].split(".")[-1]
    return ""


def field_call(node: ast.AST | None) -> ast.Call | None:
    if isinstance(node, ast.Call) and _name(node.func) == "Field":
        return node
    return None


def unwrap(annotation: ast.AST | None) -> tuple[ast.AST | None, ast.Call | None]:
    """`Annotated[X, Field(...), ...]` -> (X, the Field call); anything else -> (itself, None)."""
    if isinstance(annotation, ast.Subscript) and _name(annotation.value) == "Annotated":
        elts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        found = next((f for f in map(field_call, elts[1:]) if f is not None), None)
        return elts[0], found
    return annotation, None


def py_type(index: PyIndex, mod: Module, node: ast.AST | None, depth: int = 0) -> tuple[str, list[Any] | None]:
    """(JSON type, enum values or None) of an annotation."""
    node, _ = unwrap(node)
    if node is None or depth > 8:
        return "any", None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        for side in (node.left, node.right):
            if not (isinstance(side, ast.Constant) and side.value is None) and _name(side) != "None":
                return py_type(index, mod, side, depth + 1)
        return "null", None
    if isinstance(node, ast.Subscript):
        outer = _name(node.value)
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in OPTIONAL:
            rest = [e for e in elts if _name(e) != "None" and not (isinstance(e, ast.Constant) and e.value is None)]
            return py_type(index, mod, rest[0], depth + 1) if rest else ("null", None)
        if outer == "Literal":
            values = [e.value for e in elts if isinstance(e, ast.Constant)]
            kinds = {type(v) for v in values}
            kind = "integer" if kinds == {int} else "boolean" if kinds == {bool} else "string"
            return kind, values
        return SIMPLE.get(outer, "object"), None
    name = _name(node)
    if name in SIMPLE:
        return SIMPLE[name], None
    found = index.cls(mod, name)
    if found:
        members = enum_values(found[1])
        if members is not None:
            kinds = {type(v) for v in members}
            return ("integer" if kinds == {int} else "string"), members
        return "object", None
    return "any", None


def field_info(index: PyIndex, mod: Module, call: ast.Call | None) -> dict[str, Any]:
    """`Field(...)`'s description, alias, and whether it gives a default (`...` as default means none)."""
    if call is None:
        return {}
    out: dict[str, Any] = {}
    if call.args:
        first = call.args[0]
        out["has_default"] = not (isinstance(first, ast.Constant) and first.value is Ellipsis)
        out["default"] = index.eval(mod, first)
    for kw in call.keywords:
        if kw.arg in ("default", "default_factory"):
            is_ellipsis = isinstance(kw.value, ast.Constant) and kw.value.value is Ellipsis
            out["has_default"] = not is_ellipsis
            if kw.arg == "default":
                out["default"] = index.eval(mod, kw.value)
        elif kw.arg in ("description", "alias", "title"):
            value = index.eval(mod, kw.value)
            if isinstance(value, str):
                out[kw.arg] = value
    return out


def _default(value: Any) -> Any:
    return value if value is not UNKNOWN and isinstance(value, str | int | float | bool) else None


def build_param(
    index: PyIndex,
    mod: Module,
    name: str,
    annotation: ast.AST | None,
    default: ast.AST | None,
    doc: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One parameter from a signature argument or a model field (`default` is its `= value`, if any)."""
    _, annotated_field = unwrap(annotation)
    info = field_info(index, mod, field_call(default) or annotated_field)
    if field_call(default) is None and default is not None:
        info.setdefault("has_default", True)
        info.setdefault("default", index.eval(mod, default))
    kind, enum = py_type(index, mod, annotation)
    description = info.get("description") or (doc or {}).get(name, "")
    return param(
        info.get("alias", name),
        kind,
        description,
        not info.get("has_default", False),
        enum=enum,
        default=_default(info.get("default")),
    )


def model_params(index: PyIndex, mod: Module, name: str, depth: int = 0) -> list[dict[str, Any]] | None:
    """The fields of a model class defined in the repository, its repository bases' fields first."""
    found = index.cls(mod, name)
    if found is None or depth > 8:
        return None
    where, cls = found
    out: dict[str, dict[str, Any]] = {}
    for base in cls.bases:
        inherited = model_params(index, where, _name(base), depth + 1)
        for p in inherited or []:
            out[p["name"]] = p
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        field_name = stmt.target.id
        if field_name.startswith("_") or field_name == "model_config" or "ClassVar" in ast.unparse(stmt.annotation):
            continue
        p = build_param(index, where, field_name, stmt.annotation, stmt.value)
        out[p["name"]] = p
    return list(out.values())
