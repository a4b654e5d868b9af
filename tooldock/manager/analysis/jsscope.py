"""TypeScript/JavaScript names across a repository, from tree-sitter syntax trees: variable declarations,
functions, TypeScript enums and compiled enums (`X["ECHO"] = "echo"`), and an evaluator for the literal-ish
expressions tool definitions are made of (strings, templates, `+`, objects, arrays, `ToolName.ECHO`, `as`).
Names resolve in their own file first, then in any other file (imports are matched by name)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node

from tooldock.manager.analysis.pyscope import UNKNOWN
from tooldock.manager.analysis.syntax import MAX_DEPTH, string_value, text, unescape, walk

WRAPPERS = {
    "as_expression",
    "satisfies_expression",
    "non_null_expression",
    "parenthesized_expression",
    "type_assertion",
    "await_expression",
}


def unwrap(node: Node | None) -> Node | None:
    while node is not None and node.type in WRAPPERS:
        node = node.named_children[0] if node.named_children else None
    return node


@dataclass
class JsFile:
    rel: str
    root: Node
    names: dict[str, Node] = field(default_factory=dict)  # identifier -> value (or function) node
    members: dict[str, dict[str, Node]] = field(default_factory=dict)  # enums: name -> member -> value node


def _record_assignment(js: JsFile, node: Node) -> None:
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    if left is None or right is None:
        return
    obj = left.child_by_field_name("object")
    if obj is None or obj.type != "identifier":
        return
    if left.type == "subscript_expression":
        index = left.child_by_field_name("index")
        key = string_value(index) if index is not None else None
    elif left.type == "member_expression":
        key = text(left.child_by_field_name("property"))
    else:
        return
    if key:
        js.members.setdefault(text(obj), {}).setdefault(key, right)


def index_file(rel: str, root: Node) -> JsFile:
    js = JsFile(rel, root)
    top: dict[str, Node] = {}
    for node in walk(root):
        kind = node.type
        if kind == "variable_declarator":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name is not None and name.type == "identifier" and value is not None:
                js.names.setdefault(text(name), value)
                if node.parent is not None and node.parent.parent is not None:
                    grand = node.parent.parent
                    if grand.type == "program" or (grand.type == "export_statement" and grand.parent == root):
                        top[text(name)] = value
        elif kind in ("function_declaration", "generator_function_declaration"):
            name = node.child_by_field_name("name")
            if name is not None:
                js.names.setdefault(text(name), node)
        elif kind == "enum_declaration":
            name, body = node.child_by_field_name("name"), node.child_by_field_name("body")
            members: dict[str, Node] = {}
            for member in body.named_children if body is not None else []:
                if member.type == "enum_assignment":
                    key, value = member.child_by_field_name("name"), member.child_by_field_name("value")
                    if key is not None and value is not None:
                        members[string_value(key) or text(key)] = value
            js.members[text(name)] = members
        elif kind == "assignment_expression":
            _record_assignment(js, node)
    js.names.update(top)  # top-level declarations win over same-named locals
    return js


@dataclass
class JsIndex:
    files: dict[str, JsFile] = field(default_factory=dict)
    _names: dict[str, JsFile] = field(default_factory=dict)  # name -> the first file declaring it
    _members: dict[str, JsFile] = field(default_factory=dict)

    def add(self, js: JsFile) -> None:
        self.files[js.rel] = js
        for name in js.names:
            self._names.setdefault(name, js)
        for name in js.members:
            self._members.setdefault(name, js)

    def lookup(self, js: JsFile, name: str) -> tuple[JsFile, Node] | None:
        where = js if name in js.names else self._names.get(name)
        return (where, where.names[name]) if where is not None else None

    def members(self, js: JsFile, name: str) -> tuple[JsFile, dict[str, Node]] | None:
        where = js if name in js.members else self._members.get(name)
        return (where, where.members[name]) if where is not None else None

    def resolve(self, js: JsFile, node: Node | None, depth: int = 0) -> tuple[JsFile, Node | None]:
        """Follow identifiers (and wrappers) to the expression they name."""
        node = unwrap(node)
        while node is not None and node.type == "identifier" and depth < MAX_DEPTH:
            found = self.lookup(js, text(node))
            if found is None:
                break
            js, node = found[0], unwrap(found[1])
            depth += 1
        return js, node

    def eval(self, js: JsFile, node: Node | None, depth: int = 0) -> Any:
        """The value of a literal-ish expression, UNKNOWN when it is not one (template substitutions that do
        not evaluate are kept as `${expr}`)."""
        js, node = self.resolve(js, node, depth)
        if node is None or depth > MAX_DEPTH:
            return UNKNOWN
        d, kind = depth + 1, node.type
        if kind == "string":
            return string_value(node)
        if kind == "template_string":
            parts = []
            for child in node.named_children:
                if child.type == "template_substitution":
                    inner = self.eval(js, child.named_children[0] if child.named_children else None, d)
                    parts.append(inner if isinstance(inner, str) else text(child))
                elif child.type == "escape_sequence":
                    parts.append(unescape(text(child)))
                else:
                    parts.append(text(child))
            return "".join(parts)
        if kind == "number":
            try:
                return float(text(node)) if any(c in text(node) for c in ".eE") else int(text(node), 0)
            except ValueError:
                return UNKNOWN
        if kind in ("true", "false"):
            return kind == "true"
        if kind in ("null", "undefined"):
            return None
        if kind == "binary_expression" and text(node.child_by_field_name("operator")) == "+":
            left = self.eval(js, node.child_by_field_name("left"), d)
            right = self.eval(js, node.child_by_field_name("right"), d)
            if isinstance(left, str) and isinstance(right, str):
                return left + right
            if isinstance(left, str | int | float) and isinstance(right, str | int | float):
                return f"{left}{right}" if isinstance(left, str) or isinstance(right, str) else left + right
            return UNKNOWN
        if kind == "array":
            out: list[Any] = []
            for element in node.named_children:
                if element.type == "spread_element":
                    spread = self.eval(js, element.named_children[0] if element.named_children else None, d)
                    out += spread if isinstance(spread, list) else []
                else:
                    out.append(self.eval(js, element, d))
            return out
        if kind == "object":
            return self.object_value(js, node, d)
        if kind in ("member_expression", "subscript_expression"):
            return self.member(js, node, d)
        return UNKNOWN

    def object_value(self, js: JsFile, node: Node, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for child in node.named_children:
            if child.type == "pair":
                key = self.key(js, child.child_by_field_name("key"), depth)
                if key is not None:
                    out[key] = self.eval(js, child.child_by_field_name("value"), depth + 1)
            elif child.type == "shorthand_property_identifier":
                found = self.lookup(js, text(child))
                out[text(child)] = self.eval(found[0], found[1], depth + 1) if found else UNKNOWN
            elif child.type == "spread_element" and child.named_children:
                spread = self.eval(js, child.named_children[0], depth + 1)
                if isinstance(spread, dict):
                    out.update(spread)
        return out

    def key(self, js: JsFile, node: Node | None, depth: int = 0) -> str | None:
        if node is None:
            return None
        if node.type in ("property_identifier", "identifier"):
            return text(node)
        if node.type == "string":
            return string_value(node)
        if node.type == "computed_property_name" and node.named_children:
            value = self.eval(js, node.named_children[0], depth + 1)
            return value if isinstance(value, str) else None
        return text(node) if node.type == "number" else None

    def member(self, js: JsFile, node: Node, depth: int) -> Any:
        """`ToolName.ECHO` (an enum, compiled enum or object), `CONFIG["name"]`."""
        obj = node.child_by_field_name("object")
        if node.type == "member_expression":
            key: str | None = text(node.child_by_field_name("property"))
        else:
            index = node.child_by_field_name("index")
            key = self.key(js, index, depth) if index is not None and index.type != "number" else None
            key = key or (string_value(index) if index is not None else None)
        if obj is None or not key:
            return UNKNOWN
        if obj.type == "identifier":
            found = self.members(js, text(obj))
            if found and key in found[1]:
                return self.eval(found[0], found[1][key], depth + 1)
        container = self.eval(js, obj, depth + 1)
        if isinstance(container, dict):
            return container.get(key, UNKNOWN)
        return UNKNOWN
