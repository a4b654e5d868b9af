"""OpenTelemetry spans (issue 15): a gateway configured only by the standard `OTEL_*` variables exports
OTLP/HTTP to a collector on loopback (made here, decoding with opentelemetry-proto). A REST call's
`traceparent` header becomes the parent of the gateway's server span, the hop to the worker is a client span
under it, and the worker is told the trace (it names it when the tool fails). An MCP call is traced under the
MCP SDK's own server span, with the `_meta.traceparent` the client sent. OTEL_TRACES_EXPORTER=none: nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import EXAMPLES, MANAGER_ARGS, manager_url, run_manager
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_manager import store  # noqa: F401  (a fixture)

from tooldock.runtime.observe.tracing import _wanted

TOOLS = '''from fastmcp.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def boom() -> str:
    """Always fails."""
    raise RuntimeError("boom")
'''
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


class Collector:
    """An OTLP/HTTP trace receiver on loopback: every span it was sent, as dicts."""

    def __init__(self) -> None:
        self.spans: list[dict] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    service = {a.key: a.value.string_value for a in resource.resource.attributes}["service.name"]
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            collector.spans.append({
                                "service": service,
                                "scope": scope.scope.name,
                                "name": span.name,
                                "kind": span.kind,
                                "trace": span.trace_id.hex(),
                                "id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "status": span.status.code,
                                "attributes": {a.key: a.value.string_value or a.value.int_value for a in span.attributes},
                            })
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, predicate, what: str, timeout: float = 20) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [s for s in list(self.spans) if predicate(s)]
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no span {what} in {self.spans}")


@pytest.fixture
def collector() -> Iterator[Collector]:
    found = Collector()
    yield found
    found.server.shutdown()
    found.server.server_close()


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    (tmp_path / "src" / "traced").mkdir(parents=True)
    (tmp_path / "src" / "traced" / "tools.py").write_text(TOOLS)
    return tmp_path / "src"


def test_the_otel_variables_decide_whether_and_where_spans_go():
    assert _wanted({}) == []
    assert _wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == ["otlp"]
    assert _wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}) == ["otlp"]
    assert _wanted({"OTEL_TRACES_EXPORTER": "console,otlp"}) == ["console", "otlp"]
    assert _wanted({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}) == []
    assert _wanted({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}) == []


def test_rest_and_mcp_calls_are_traced_from_the_callers_context_to_the_worker(make_gateway, collector, tools):
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_SERVICE_NAME": "tooldock-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    gateway = make_gateway(tools, env=env)
    traceparent = f"00-{TRACE}-{PARENT}-01"
    answer = gateway.post("/tools/add", "traced", {"a": 2, "b": 3}, headers={"traceparent": traceparent})
    assert answer.json() == {"result": 5}

    server = collector.wait(lambda s: s["name"] == "tools/call add" and s["trace"] == TRACE, "for the REST call")[0]
    assert server["parent"] == PARENT and server["kind"] == 2  # SPAN_KIND_SERVER
    assert server["service"] == "tooldock-under-test" and server["status"] != 2
    attrs = server["attributes"]
    assert attrs["tooldock.namespace"] == "traced" and attrs["gen_ai.tool.name"] == "add"
    assert attrs["tooldock.front_end"] == "rest" and attrs["tooldock.status"] == "ok"
    assert attrs["tooldock.request_id"] == answer.headers["x-request-id"]
    hop = collector.wait(lambda s: s["parent"] == server["id"], "for the hop to the worker")[0]
    assert hop["name"] == "worker tool 'add'" and hop["kind"] == 3 and hop["trace"] == TRACE  # SPAN_KIND_CLIENT

    failed = gateway.post("/tools/boom", "traced", {}, headers={"traceparent": f"00-{'ab' * 16}-{PARENT}-01"})
    assert failed.status_code >= 400
    span = collector.wait(lambda s: s["name"] == "tools/call boom", "for the failed call")[0]
    assert span["status"] == 2 and span["attributes"]["error.type"] == span["attributes"]["tooldock.status"]
    gateway.wait_for(lambda: f"trace {'ab' * 16}" in gateway.logs, 10, "the worker to name the trace")

    asyncio.run(_mcp_call(gateway))
    mcp = collector.wait(lambda s: s["name"] == "tools/call add" and s["scope"] == "mcp-python-sdk", "from the SDK")
    mcp_trace = next(s for s in mcp if s["trace"] == "cd" * 16)
    ours = collector.wait(lambda s: s["parent"] == mcp_trace["id"], "under the SDK's span")[0]
    assert ours["kind"] == 1 and ours["attributes"]["tooldock.front_end"] == "mcp"  # SPAN_KIND_INTERNAL
    collector.wait(lambda s: s["parent"] == ours["id"] and s["name"] == "worker tool 'add'", "for the MCP hop")


async def _mcp_call(gateway) -> None:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=gateway.headers(), timeout=60) as http:
        async with streamable_http_client(f"{gateway.url}/ns/traced/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                meta = {"traceparent": f"00-{'cd' * 16}-{PARENT}-01"}
                result = await session.call_tool("add", {"a": 1, "b": 1}, meta=meta)
                assert not result.is_error


def test_otel_traces_exporter_none_turns_tracing_off(make_gateway, collector, tools):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_TRACES_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "100"}
    gateway = make_gateway(tools, env=env)
    gateway.post("/tools/add", "traced", {"a": 2, "b": 3}, headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
    time.sleep(1)
    assert collector.spans == [] and "OpenTelemetry traces on" not in gateway.logs


def test_a_relay_socket_call_joins_the_callers_trace(make_gateway, collector, tools):
    """`traceparent` in a relay call's params is what the header is over HTTP: the parent of the call's span."""
    from relaykit import Line, cleanup, relay_env

    env, sock, keys = relay_env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_BSP_SCHEDULE_DELAY="100")
    make_gateway(tools, env=env)
    _, key = keys.create("tracer", "write")
    line = Line(sock)
    try:
        answer = line.rpc("oubliette_call_tool", 1, api_key=key, tool="traced_add", arguments={"a": 2, "b": 2},
                          traceparent=f"00-{'ef' * 16}-{PARENT}-01")
        assert answer["result"]["structuredContent"] == {"result": 4}
    finally:
        line.close()
        cleanup(sock)
    span = collector.wait(lambda s: s["name"] == "tools/call add" and s["trace"] == "ef" * 16, "for the relay call")[0]
    assert span["parent"] == PARENT and span["attributes"]["tooldock.front_end"] == "relay"
    collector.wait(lambda s: s["parent"] == span["id"] and s["name"] == "worker tool 'add'", "for the relay's hop")


def test_a_manager_tool_call_is_one_trace_with_the_gateway_call_it_makes(make_gateway, collector, store):
    """`serve --manager` with OTEL_* set: the manager exports the MCP SDK's span for `test_tool` (service
    `tooldock-manager`), and its REST call to the gateway carries `traceparent`, so the gateway's span of
    that call is a child of it in the same trace."""
    env = {**store, "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    gateway = make_gateway(EXAMPLES, env=env, args=MANAGER_ARGS)

    async def flow(call):
        return await call("test_tool", namespace="basic-tool", tool_name="say_hello", input={"name": "Ada"})

    error, tested = run_manager(manager_url(gateway), flow)
    assert not error, tested
    manager = collector.wait(
        lambda s: s["service"] == "tooldock-manager" and s["name"] == "tools/call test_tool", "from the manager"
    )[0]
    served = collector.wait(
        lambda s: s["service"] == "tooldock" and s["name"] == "tools/call say_hello", "from the gateway"
    )[0]
    assert served["trace"] == manager["trace"] and served["parent"] == manager["id"], (manager, served)
    assert served["attributes"]["tooldock.front_end"] == "rest"
