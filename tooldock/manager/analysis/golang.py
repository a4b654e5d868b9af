"""Go servers, read with tree-sitter: mcp-go's `mcp.NewTool("name", mcp.WithDescription(...),
mcp.WithString("p", mcp.Required(), mcp.Description(...)), ...)` and the official Go SDK's
`mcp.AddTool(server, &mcp.Tool{Name: ..., Description: ...}, handler)`, whose parameters are the fields of the
handler's input struct (`json:"name,omitempty"` and `jsonschema:"description"` tags); plus `os.Getenv` /
`os.LookupEnv` names and URL literals. Constants resolve across the package's files."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node

from tooldock.manager.analysis.facts import Facts, env_name, param, tool, url_host
from tooldock.manager.analysis.syntax import MAX_DEPTH, parse, string_value, text, walk
from tooldock.manager.analysis.walk import SourceFile

WITH = {
    "WithString": "string",
    "WithNumber": "number",
    "WithInteger": "integer",
    "WithBoolean": "boolean",
    "WithArray": "array",
    "WithObject": "object",
    "WithAny": "any",
}
GO_TYPES = {"string": "string", "bool": "boolean", "float32": "number", "float64": "number", "any": "any"}
FRAMEWORKS = {"github.com/mark3labs/mcp-go": "mcp-go", "github.com/modelcontextprotocol/go-sdk": "go-sdk"}
TAG = re.compile(r'(\w+):"((?:[^"\\]|\\.)*)"')


@dataclass
class GoIndex:
    consts: dict[str, Node] = field(default_factory=dict)  # package-level const/var values
    functions: dict[str, Node] = field(default_factory=dict)
    structs: dict[str, Node] = field(default_factory=dict)  # type name -> struct_type

    def add(self, root: Node) -> None:
        for node in walk(root):
            if node.type in ("const_spec", "var_spec"):
                names = [c for c in node.children_by_field_name("name")]
                values = node.child_by_field_name("value")
                for name, value in zip(names, values.named_children if values is not None else [], strict=False):
                    self.consts.setdefault(text(name), value)
            elif node.type == "function_declaration":
                self.functions.setdefault(text(node.child_by_field_name("name")), node)
            elif node.type == "type_spec":
                kind = node.child_by_field_name("type")
                if kind is not None and kind.type == "struct_type":
                    self.structs.setdefault(text(node.child_by_field_name("name")), kind)

    def eval(self, node: Node | None, depth: int = 0) -> Any:
        if node is None or depth > MAX_DEPTH:
            return None
        value = string_value(node)
        if value is not None:
            return value
        if node.type == "identifier" and text(node) in self.consts:
            return self.eval(self.consts[text(node)], depth + 1)
        if node.type == "parenthesized_expression" and node.named_children:
            return self.eval(node.named_children[0], depth + 1)
        if node.type == "binary_expression" and text(node.child_by_field_name("operator")) == "+":
            left = self.eval(node.child_by_field_name("left"), depth + 1)
            right = self.eval(node.child_by_field_name("right"), depth + 1)
            return left + right if isinstance(left, str) and isinstance(right, str) else None
        return None


def _call(node: Node) -> tuple[str, list[Node]]:
    """(the called name without its package, the arguments) of a call expression."""
    func = node.child_by_field_name("function")
    if func is not None and func.type == "selector_expression":
        func = func.child_by_field_name("field")
    args = node.child_by_field_name("arguments")
    return text(func), [a for a in (args.named_children if args is not None else []) if a.type != "comment"]


def _new_tool(index: GoIndex, rel: str, node: Node) -> dict[str, Any] | None:
    _, args = _call(node)
    name = index.eval(args[0]) if args else None
    if not isinstance(name, str):
        return None
    description, params = "", []
    for option in args[1:]:
        if option.type != "call_expression":
            continue
        kind, option_args = _call(option)
        if kind == "WithDescription" and option_args:
            description = index.eval(option_args[0]) or ""
        elif kind in WITH and option_args:
            pname = index.eval(option_args[0])
            if not isinstance(pname, str):
                continue
            p = param(pname, WITH[kind], "", False)
            for prop in option_args[1:]:
                prop_kind, prop_args = _call(prop) if prop.type == "call_expression" else ("", [])
                if prop_kind == "Required":
                    p["required"] = True
                elif prop_kind == "Description" and prop_args:
                    p["description"] = index.eval(prop_args[0]) or ""
                elif prop_kind == "Enum":
                    p["enum"] = [index.eval(a) for a in prop_args]
            params.append(p)
    return tool(name, rel, description, params, line=node.start_point[0] + 1)


def _struct_params(index: GoIndex, type_node: Node | None) -> list[dict[str, Any]]:
    """The json fields of the handler's input struct (a named type of the package, through `*` and generics)."""
    while type_node is not None and type_node.type in ("pointer_type", "generic_type", "type_arguments", "type_elem"):
        if type_node.type == "generic_type":
            type_node = type_node.child_by_field_name("type_arguments")
        else:
            type_node = type_node.named_children[-1] if type_node.named_children else None
    struct = index.structs.get(text(type_node)) if type_node is not None else None
    out = []
    for decl in walk(struct) if struct is not None else []:
        if decl.type != "field_declaration":
            continue
        names = decl.children_by_field_name("name")
        tag_node = decl.child_by_field_name("tag")
        tags = dict(TAG.findall(string_value(tag_node) or "")) if tag_node is not None else {}
        json_tag = tags.get("json", "").split(",")
        for name in names:
            if not text(name)[:1].isupper() or json_tag[0] == "-":
                continue
            go_type = text(decl.child_by_field_name("type")).lstrip("*")
            kind = GO_TYPES.get(go_type) or (
                "integer" if go_type.startswith(("int", "uint")) else "array" if go_type.startswith("[]") else "object"
            )
            desc = tags.get("jsonschema", "")
            desc = desc.split("description=", 1)[1].split(",")[0] if "description=" in desc else desc
            optional = "omitempty" in json_tag or "omitzero" in json_tag
            out.append(param(json_tag[0] or text(name), kind, desc, not optional))
    return out


def _sdk_tool(index: GoIndex, rel: str, literal: Node) -> dict[str, Any] | None:
    fields: dict[str, Node] = {}
    body = literal.child_by_field_name("body")
    for element in body.named_children if body is not None else []:
        if element.type == "keyed_element" and len(element.named_children) == 2:
            key, value = element.named_children
            fields[text(key)] = value.named_children[0] if value.named_children else value
    name = index.eval(fields.get("Name"))
    if not isinstance(name, str):
        return None
    description = index.eval(fields.get("Description")) or ""
    params: list[dict[str, Any]] = []
    call = literal.parent.parent if literal.parent is not None else None  # &mcp.Tool{} -> argument_list
    call = call.parent if call is not None and call.type == "argument_list" else call
    if call is not None and call.type == "call_expression" and _call(call)[0] == "AddTool":
        handler = _call(call)[1][-1]
        if handler.type == "identifier":
            handler = index.functions.get(text(handler), handler)
        plist = handler.child_by_field_name("parameters")
        decls = [d for d in plist.named_children if d.type == "parameter_declaration"] if plist is not None else []
        if len(decls) >= 3:
            params = _struct_params(index, decls[2].child_by_field_name("type"))
    return tool(name, rel, description, params, line=literal.start_point[0] + 1)


def file_facts(index: GoIndex, rel: str, root: Node, with_tools: bool) -> Facts:
    facts = Facts()
    for node in walk(root):
        if node.type == "import_spec":
            path = string_value(node.child_by_field_name("path") or node) or ""
            facts.frameworks |= {fw for prefix, fw in FRAMEWORKS.items() if path.startswith(prefix)}
        elif node.type in ("interpreted_string_literal", "raw_string_literal"):
            host = url_host(string_value(node) or "")
            if host and (node.parent is None or node.parent.type != "import_spec"):
                facts.hosts.add(host)
        elif node.type == "call_expression":
            name, args = _call(node)
            if (
                name in ("Getenv", "LookupEnv")
                and args
                and text(node.child_by_field_name("function")).startswith("os.")
            ):
                env = env_name(index.eval(args[0]))
                if env:
                    facts.env.add(env)
            elif name == "NewTool" and with_tools:
                found = _new_tool(index, rel, node)
                facts.tools += [found] if found else []
        elif node.type == "composite_literal" and with_tools:
            kind = text(node.child_by_field_name("type"))
            if kind in ("mcp.Tool", "Tool"):
                found = _sdk_tool(index, rel, node)
                facts.tools += [found] if found else []
    return facts


def analyze_go(sources: list[tuple[SourceFile, str]]) -> dict[str, Facts]:
    index, roots = GoIndex(), {}
    for src, source in sources:
        roots[src.rel] = parse(src.rel, source)
        index.add(roots[src.rel])
    tests = {src.rel for src, _ in sources if src.is_test}
    return {rel: file_facts(index, rel, root, rel not in tests) for rel, root in roots.items()}
