"""zod schemas as tool parameters, read from the syntax tree: `z.string().describe("...")`, `.optional()`,
`.default(v)`, `.nullish()`, `z.enum([...])`, `z.nativeEnum(E)`, `z.array(...)`, `z.object({...})` (nested),
`.extend({...})`, `.merge(Other)`, `.pick/.omit({...})`, `...Other.shape` spreads, and schemas named by an
identifier defined anywhere in the repository."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node

from tooldock.manager.analysis.facts import param
from tooldock.manager.analysis.jsscope import JsFile, JsIndex
from tooldock.manager.analysis.pyscope import UNKNOWN
from tooldock.manager.analysis.syntax import MAX_DEPTH, text

KINDS = {
    "string": "string",
    "email": "string",
    "url": "string",
    "uuid": "string",
    "date": "string",
    "iso": "string",
    "number": "number",
    "int": "integer",
    "bigint": "integer",
    "boolean": "boolean",
    "array": "array",
    "tuple": "array",
    "set": "array",
    "object": "object",
    "looseObject": "object",
    "strictObject": "object",
    "record": "object",
    "map": "object",
    "enum": "string",
    "nativeEnum": "string",
    "literal": "string",
    "union": "any",
    "discriminatedUnion": "object",
    "any": "any",
    "unknown": "any",
    "null": "null",
}
PASS_THROUGH = {
    "strict",
    "passthrough",
    "strip",
    "refine",
    "superRefine",
    "transform",
    "catch",
    "brand",
    "readonly",
    "min",
    "max",
    "length",
    "regex",
    "trim",
    "nonempty",
    "positive",
    "nonnegative",
    "negative",
    "email",
    "url",
    "uuid",
    "datetime",
    "startsWith",
    "endsWith",
    "gte",
    "lte",
    "gt",
    "lt",
    "finite",
    "safe",
    "multipleOf",
    "step",
    "nullable",
    "meta",
}


@dataclass
class Zod:
    type: str = "any"
    description: str = ""
    required: bool = True
    enum: list[Any] | None = None
    default: Any = None
    shape: dict[str, Zod] | None = None  # the fields of an object schema, in order
    extra: dict[str, Any] = field(default_factory=dict)

    def params(self) -> list[dict[str, Any]]:
        return [
            param(name, z.type, z.description, z.required, enum=z.enum, default=z.default)
            for name, z in (self.shape or {}).items()
        ]


def _args(node: Node) -> list[Node]:
    args = node.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _is_z(node: Node) -> bool:
    return node.type == "identifier" and text(node) in ("z", "zod", "Zod")


def shape_of(index: JsIndex, js: JsFile, node: Node | None, depth: int = 0) -> dict[str, Zod] | None:
    """A raw shape `{a: z.string(), ...}` (or a name for one) -> its fields; None when it is not one."""
    js, node = index.resolve(js, node, depth)
    if node is None or depth > MAX_DEPTH:
        return None
    if node.type == "member_expression" and text(node.child_by_field_name("property")) == "shape":
        return shape_of(index, js, node.child_by_field_name("object"), depth + 1)  # `Schema.shape`
    if node.type != "object":
        z = zod(index, js, node, depth + 1)
        return z.shape if z is not None else None
    out: dict[str, Zod] = {}
    for child in node.named_children:
        if child.type == "pair":
            key = index.key(js, child.child_by_field_name("key"), depth)
            value = zod(index, js, child.child_by_field_name("value"), depth + 1)
            if key is None or value is None:
                return None
            out[key] = value
        elif child.type == "shorthand_property_identifier":
            found = index.lookup(js, text(child))
            value = zod(index, found[0], found[1], depth + 1) if found else None
            if value is None:
                return None
            out[text(child)] = value
        elif child.type == "spread_element" and child.named_children:
            inner = child.named_children[0]  # `...Base.shape` or `...baseShape`
            if inner.type == "member_expression" and text(inner.child_by_field_name("property")) == "shape":
                inner = inner.child_by_field_name("object") or inner
            out.update(shape_of(index, js, inner, depth + 1) or {})
    return out


def zod(index: JsIndex, js: JsFile, node: Node | None, depth: int = 0) -> Zod | None:
    """What a zod expression says about one value; None when `node` is not a zod expression."""
    js, node = index.resolve(js, node, depth)
    if node is None or node.type != "call_expression" or depth > MAX_DEPTH:
        return None
    func = node.child_by_field_name("function")
    if func is None or func.type != "member_expression":
        return None
    obj, method, args = func.child_by_field_name("object"), text(func.child_by_field_name("property")), _args(node)
    if obj is None:
        return None
    if _is_z(obj) or (obj.type == "member_expression" and _is_z(obj.child_by_field_name("object") or obj)):
        return _base(index, js, method, args, depth)
    inner = zod(index, js, obj, depth + 1)
    if inner is None:
        return None
    return _modify(index, js, inner, method, args, depth)


def _base(index: JsIndex, js: JsFile, method: str, args: list[Node], depth: int) -> Zod | None:
    if method not in KINDS:
        return None
    z = Zod(type=KINDS[method])
    if method in ("object", "looseObject", "strictObject"):
        z.shape = shape_of(index, js, args[0], depth + 1) if args else {}
    elif method == "enum" and args:
        values = index.eval(js, args[0], depth + 1)
        z.enum = [v for v in values if isinstance(v, str)] if isinstance(values, list) else None
    elif method == "nativeEnum" and args and args[0].type == "identifier":
        found = index.members(js, text(args[0]))
        if found:
            z.enum = [index.eval(found[0], v, depth + 1) for v in found[1].values()]
    elif method == "literal" and args:
        value = index.eval(js, args[0], depth + 1)
        if value is not UNKNOWN:
            z.enum = [value]
            z.type = {bool: "boolean", int: "integer", float: "number"}.get(type(value), "string")
    elif method == "union" and args:
        options = index.resolve(js, args[0], depth + 1)[1]
        first = options.named_children[0] if options is not None and options.named_children else None
        inner = zod(index, js, first, depth + 1)
        z.type = inner.type if inner is not None else "any"
    return z


def _modify(index: JsIndex, js: JsFile, z: Zod, method: str, args: list[Node], depth: int) -> Zod | None:
    z = Zod(z.type, z.description, z.required, z.enum, z.default, dict(z.shape) if z.shape is not None else None)
    if method == "describe" and args:
        value = index.eval(js, args[0], depth + 1)
        z.description = value if isinstance(value, str) else z.description
    elif method in ("optional", "nullish"):
        z.required = False
    elif method == "default" and args:
        z.required = False
        value = index.eval(js, args[0], depth + 1)
        z.default = value if isinstance(value, str | int | float | bool) else None
    elif method == "int":
        z.type = "integer"
    elif method in ("extend", "merge", "safeExtend") and args:
        extra = shape_of(index, js, args[0], depth + 1)
        z.shape = {**(z.shape or {}), **(extra or {})}
    elif method in ("pick", "omit") and args and z.shape is not None:
        chosen = index.eval(js, args[0], depth + 1)
        keys = set(chosen) if isinstance(chosen, dict) else set()
        z.shape = {k: v for k, v in z.shape.items() if (k in keys) == (method == "pick")}
    elif method in ("partial",) and z.shape is not None:
        z.shape = {k: Zod(v.type, v.description, False, v.enum, v.default, v.shape) for k, v in z.shape.items()}
    elif method in ("array",):
        z = Zod(type="array", description=z.description)
    elif method not in PASS_THROUGH and method not in ("or", "and", "pipe", "check", "overwrite"):
        return None
    return z
