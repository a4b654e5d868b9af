"""Which 2026-07-28 requests the lean path takes (runtime/mcp/leanmodern.py), decided without a gateway: the
SDK's ladder and params validation, the tool's kind, and a worker whose handshake changes what it serves."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tooldock.runtime.mcp.leanmodern import ModernLean

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "add"}


class Entry:  # what the lean path reads of a NamespaceEntry (weakly referenced, as the real one is)
    def __init__(self, tools: list[dict[str, Any]], plain: frozenset[str], optional: tuple[str, ...] = ()) -> None:
        self.worker = SimpleNamespace(plain_tools=plain, tools=tools)
        config = SimpleNamespace(tasks_required=(), tasks_optional=optional)
        self.source = SimpleNamespace(is_upstream=False, config=config)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.worker.tools


def lean_for(entry: Entry) -> ModernLean:
    return ModernLean(SimpleNamespace(registry=SimpleNamespace(snapshot=SimpleNamespace(entries={"ns": entry}))))


def call(name: str = "add", meta: dict[str, Any] = META, **extra: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": {"a": 1, "b": 2}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params, **extra}


TOOLS = [
    {"name": "add", "inputSchema": {"type": "object"}},
    {"name": "region", "inputSchema": {"properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}},
    {"name": "nightly", "inputSchema": {"type": "object"}},
    {"name": "asks", "inputSchema": {"type": "object"}},
]


def test_a_plain_call_is_taken_with_its_envelope():
    lean = lean_for(Entry(TOOLS, frozenset({"add", "region", "nightly"}), optional=("nightly",)))
    route = lean.route("ns", call(), HEADERS)
    assert route is not None and route.method == "tools/call" and route.rid == 3
    assert route.caller("127.0.0.1") == {"front_end": "mcp", "client": "127.0.0.1", "client_info": None,
                                         "protocol": MODERN}
    for name in ("region", "nightly", "asks", "missing"):  # a header declaration, a task tool, a Context tool
        assert lean.route("ns", call(name), {**HEADERS, "mcp-name": name}) is None, name


@pytest.mark.parametrize(
    "message, headers",
    [
        pytest.param(call(), {**HEADERS, "mcp-name": "other"}, id="name-header-differs"),
        pytest.param(call(), {k: v for k, v in HEADERS.items() if k != "mcp-method"}, id="no-method-header"),
        pytest.param(call(), {**HEADERS, "mcp-protocol-version": "2025-11-25"}, id="version-header-differs"),
        pytest.param(call(meta={}), HEADERS, id="no-envelope"),
        pytest.param(call(meta={**META, "io.modelcontextprotocol/clientInfo": 5}), HEADERS, id="bad-client-info"),
        pytest.param(call(meta={**META, "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}}}), HEADERS, id="client-reads-tasks"),
        pytest.param(call(extra_field=1), HEADERS, id="unknown-envelope-member"),
        pytest.param(call(id=True), HEADERS, id="boolean-id"),
        pytest.param({**call(), "params": {**call()["params"], "task": {}}}, HEADERS, id="task-augmented"),
        pytest.param([call()], HEADERS, id="batch"),
    ],
)
def test_what_the_sdk_must_answer_is_left_to_it(message, headers):
    assert lean_for(Entry(TOOLS, frozenset({"add"}))).route("ns", message, headers) is None


def test_a_worker_that_restarts_with_other_tools_is_read_again():
    entry = Entry(TOOLS, frozenset({"add"}))
    lean = lean_for(entry)
    assert lean.route("ns", call(), HEADERS) is not None
    entry.worker.plain_tools = frozenset()  # its next handshake: `add` now takes a Context
    assert lean.route("ns", call(), HEADERS) is None
    entry.worker.plain_tools, entry.worker.tools = frozenset({"add"}), [{"name": "add", "inputSchema": {}}]
    assert lean.route("ns", call(), HEADERS) is not None
