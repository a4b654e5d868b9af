"""tree-sitter parsers (the grammars from PyPI: TypeScript, TSX, JavaScript, Go) and the node helpers the
TypeScript/JavaScript and Go analyzers share: text, string literal values, escape sequences."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator

import tree_sitter
import tree_sitter_go
import tree_sitter_javascript
import tree_sitter_typescript
from tree_sitter import Node

MAX_DEPTH = 24  # how many identifier / call hops an evaluation follows


@functools.cache
def parser(kind: str) -> tree_sitter.Parser:
    grammar = {
        "typescript": tree_sitter_typescript.language_typescript,
        "tsx": tree_sitter_typescript.language_tsx,
        "javascript": tree_sitter_javascript.language,
        "go": tree_sitter_go.language,
    }[kind]
    return tree_sitter.Parser(tree_sitter.Language(grammar()))


def grammar_for(rel: str) -> str:
    suffix = rel.rsplit(".", 1)[-1].lower()
    return {"ts": "typescript", "mts": "typescript", "cts": "typescript", "tsx": "tsx", "go": "go"}.get(
        suffix, "javascript"
    )


def parse(rel: str, text: str) -> Node:
    return parser(grammar_for(rel)).parse(text.encode("utf-8")).root_node


def text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", errors="replace") if node is not None else ""


def walk(node: Node) -> Iterator[Node]:
    """Every node under `node` (itself included), depth first, without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0", "a": "\a"}


def unescape(seq: str) -> str:
    """One escape sequence (`\\n`, `\\u00e9`, `\\x41`, `\\"`) as the character it stands for."""
    body = seq[1:]
    if body in _ESCAPES:
        return _ESCAPES[body]
    if body[:1] in ("u", "x", "U") and len(body) > 1:
        digits = body[1:].strip("{}")
        try:
            return chr(int(digits, 16))
        except ValueError:
            return seq
    if body.startswith("\n") or body.startswith("\r"):  # a line continuation
        return ""
    return body


def string_value(node: Node) -> str | None:
    """The value of a JS `string` or Go `interpreted_string_literal` / `raw_string_literal`; None otherwise."""
    if node.type in ("string", "interpreted_string_literal"):
        parts = []
        for child in node.named_children:
            if child.type == "escape_sequence":
                parts.append(unescape(text(child)))
            else:
                parts.append(text(child))
        return "".join(parts)
    if node.type == "raw_string_literal":
        return text(node)[1:-1]
    return None


def json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
