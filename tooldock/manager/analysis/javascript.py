"""TypeScript/JavaScript servers, read with tree-sitter: the `@modelcontextprotocol/sdk` McpServer's
`server.tool(name, description?, zodShape?, annotations?, handler)`, `server.registerTool(name, {title,
description, inputSchema}, handler)` (and `experimental.tasks.registerToolTask`), low-level
`setRequestHandler(ListToolsRequestSchema, ...)` tables of JSON-schema objects or `zodToJsonSchema(X)`, and
the npm `fastmcp`'s `server.addTool({name, description, parameters})`; plus environment variables
(`process.env.X`, `process.env["X"]`, `const {X} = process.env`) and URL literals."""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from tooldock.manager.analysis.facts import Facts, env_name, schema_params, tool, url_host
from tooldock.manager.analysis.jsscope import JsFile, JsIndex, index_file, unwrap
from tooldock.manager.analysis.syntax import parse, string_value, text, walk
from tooldock.manager.analysis.walk import SourceFile
from tooldock.manager.analysis.zod import Zod, shape_of

FUNCTIONS = {"arrow_function", "function_expression", "function", "function_declaration", "identifier"}
TO_JSON_SCHEMA = ("zodToJsonSchema", "toJSONSchema", "toJsonSchema", "zodToJSONSchema")
MAX_FOLLOWED, MAX_TABLE_NODES = 200, 500_000  # declarations followed from a tools/list handler, nodes read
FRAMEWORK_IMPORTS = {"@modelcontextprotocol/sdk": "mcp-sdk", "fastmcp": "fastmcp"}


def _args(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _str(index: JsIndex, js: JsFile, node: Node | None) -> str | None:
    value = index.eval(js, node)
    return value if isinstance(value, str) else None


def _line(node: Node) -> int:
    return node.start_point[0] + 1


def _schema(index: JsIndex, js: JsFile, node: Node | None) -> list[dict[str, Any]] | None:
    """inputSchema / parameters: a raw zod shape, a zod object, a JSON schema, `zodToJsonSchema(X)`."""
    js, target = index.resolve(js, node)
    if target is None:
        return None
    if target.type == "call_expression":
        callee = text(target.child_by_field_name("function")).split(".")[-1]
        if callee in TO_JSON_SCHEMA and _args(target):
            target = _args(target)[0]
    shape = shape_of(index, js, target)
    if shape is not None:
        return Zod(shape=shape).params()
    return schema_params(index.eval(js, target))


def _tool_call(index: JsIndex, js: JsFile, call: Node, method: str) -> dict[str, Any] | None:
    args = _args(call)
    if method == "addTool" and len(args) == 1:  # fastmcp (npm): addTool({name, description, parameters})
        config = index.eval(js, args[0])
        obj = index.resolve(js, args[0])[1]
        if not isinstance(config, dict) or not isinstance(config.get("name"), str) or obj is None:
            return None
        params = _schema(index, js, _pair(index, js, obj, "parameters"))
        description = config.get("description")
        return tool(config["name"], js.rel, description if isinstance(description, str) else "", params or [])
    name = _str(index, js, args[0]) if args else None
    if name is None or len(args) < 2:
        return None
    if method in ("registerTool", "registerToolTask"):
        config_node = index.resolve(js, args[1])[1]
        if config_node is None or config_node.type != "object":
            return None
        config = index.eval(js, config_node)
        description = config.get("description") if isinstance(config, dict) else None
        params = _schema(index, js, _pair(index, js, config_node, "inputSchema"))
        title = config.get("title") if isinstance(config, dict) and isinstance(config.get("title"), str) else None
        return tool(name, js.rel, description if isinstance(description, str) else "", params or [], title=title)
    # server.tool(name, [description], [paramsSchema], [annotations], handler)
    rest, description, params = args[1:-1], "", []
    if rest and isinstance(index.eval(js, rest[0]), str):
        description, rest = index.eval(js, rest[0]), rest[1:]
    if rest:
        shape = shape_of(index, js, rest[0])
        params = Zod(shape=shape).params() if shape is not None else []
    if unwrap(args[-1]) is None or unwrap(args[-1]).type not in FUNCTIONS:  # type: ignore[union-attr]
        return None
    return tool(name, js.rel, description, params)


def _pair(index: JsIndex, js: JsFile, obj: Node, key: str) -> Node | None:
    for child in obj.named_children:
        if child.type == "pair" and index.key(js, child.child_by_field_name("key")) == key:
            return child.child_by_field_name("value")
        if child.type == "shorthand_property_identifier" and text(child) == key:
            found = index.lookup(js, key)
            return found[1] if found else None
    return None


def _table(index: JsIndex, js: JsFile, handler: Node) -> list[dict[str, Any]]:
    """Tool objects (`{name, description, inputSchema}`) in a tools/list handler and in the declarations of
    the names it uses (`tools: [ECHO_TOOL, ...]`, `const tools = [...]`, across files)."""
    out: list[dict[str, Any]] = []
    queue: list[tuple[JsFile, Node]] = [(js, handler)]
    seen: set[int] = set()
    followed = 0
    while queue and followed < MAX_FOLLOWED and len(seen) < MAX_TABLE_NODES:
        followed += 1
        where, root = queue.pop(0)
        stack = [root]
        while stack:
            node = stack.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            if node.type == "object" and _pair(index, where, node, "name") is not None:
                found = _table_entry(index, where, node)
                if found is not None:
                    out.append(found)
                    continue
            if node.type == "identifier":
                target = index.lookup(where, text(node))
                if target is not None and target[1].id not in seen and target[1].type not in FUNCTIONS:
                    queue.append(target)
            stack.extend(reversed(node.children))
    return out


def _table_entry(index: JsIndex, js: JsFile, obj: Node) -> dict[str, Any] | None:
    name = _str(index, js, _pair(index, js, obj, "name"))
    schema = _pair(index, js, obj, "inputSchema")
    if name is None or (schema is None and _pair(index, js, obj, "description") is None):
        return None
    description = _str(index, js, _pair(index, js, obj, "description")) or ""
    return tool(name, js.rel, description, _schema(index, js, schema) or [], line=_line(obj))


def _tools(index: JsIndex, js: JsFile) -> list[dict[str, Any]]:
    out = []
    for node in walk(js.root):
        if node.type != "call_expression":
            continue
        func = node.child_by_field_name("function")
        if func is None or func.type != "member_expression":
            continue
        method = text(func.child_by_field_name("property"))
        if method in ("tool", "registerTool", "registerToolTask", "addTool"):
            found = _tool_call(index, js, node, method)
            if found is not None:
                found.setdefault("line", _line(node))
                out.append(found)
        elif method == "setRequestHandler":
            args = _args(node)
            if len(args) == 2 and ("ListTools" in text(args[0]) or string_value(args[0]) == "tools/list"):
                handler = index.resolve(js, args[1])[1]
                out += _table(index, js, handler) if handler is not None else []
    return out


def file_facts(index: JsIndex, js: JsFile, with_tools: bool) -> Facts:
    facts = Facts(tools=_tools(index, js) if with_tools else [])
    for node in walk(js.root):
        kind = node.type
        if kind == "string":
            value = string_value(node) or ""
            host = url_host(value)
            parent = node.parent
            if parent is not None and parent.type in ("import_statement", "export_statement", "call_expression"):
                for package, framework in FRAMEWORK_IMPORTS.items():  # import / require / import()
                    if value == package or value.startswith(package + "/"):
                        facts.frameworks.add(framework)
            if host:
                facts.hosts.add(host)
        elif kind == "arguments" and node.parent is not None:  # require("x") / import("x")
            callee = text(node.parent.child_by_field_name("function"))
            for arg in node.named_children if callee in ("require", "import") else []:
                value = string_value(arg) or ""
                for package, framework in FRAMEWORK_IMPORTS.items():
                    if value == package or value.startswith(package + "/"):
                        facts.frameworks.add(framework)
        elif kind == "template_string" and node.named_children:
            first = node.named_children[0]
            host = url_host(text(first)) if first.type == "string_fragment" else None
            if host and "/" in text(first)[8:]:
                facts.hosts.add(host)
        elif kind in ("member_expression", "subscript_expression"):
            if text(node.child_by_field_name("object")) == "process.env":
                key = node.child_by_field_name("property" if kind == "member_expression" else "index")
                name = env_name(text(key) if kind == "member_expression" else index.eval(js, key))
                if name:
                    facts.env.add(name)
        elif kind == "variable_declarator" and text(node.child_by_field_name("value")) == "process.env":
            pattern = node.child_by_field_name("name")
            for child in pattern.named_children if pattern is not None and pattern.type == "object_pattern" else []:
                key = child if child.type != "pair_pattern" else child.child_by_field_name("key")
                if child.type == "object_assignment_pattern":
                    key = child.child_by_field_name("left")
                name = env_name(text(key))
                if name:
                    facts.env.add(name)
    return facts


def analyze_javascript(sources: list[tuple[SourceFile, str]]) -> dict[str, Facts]:
    index = JsIndex()
    for src, source in sources:
        index.add(index_file(src.rel, parse(src.rel, source)))
    tests = {src.rel for src, _ in sources if src.is_test}
    return {rel: file_facts(index, js, rel not in tests) for rel, js in index.files.items()}
