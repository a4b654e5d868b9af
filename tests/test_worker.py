"""The worker process on its own: handshake, ops, error codes, multiplexing, cancellation, shutdown."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, unix_connect


class WorkerProc:
    def __init__(self, folder: Path, files: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tdw-"))
        self.socket = self.dir / "w.sock"
        args = [sys.executable, "-m", "tooldock.worker", "--namespace", folder.name, "--dir", str(folder),
                "--socket", str(self.socket)]
        for f in files or []:
            args += ["--file", f]
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
        deadline = time.monotonic() + 60
        while not self.socket.exists():
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            assert time.monotonic() < deadline, "worker did not start"
            time.sleep(0.05)
        self.sock = unix_connect(self.socket)
        self.file = self.sock.makefile("rwb")
        self.handshake = self.read()

    def send(self, message: dict | bytes) -> None:
        self.file.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        self.file.flush()

    def read(self) -> dict:
        line = self.file.readline()
        assert line, "worker closed the connection"
        return json.loads(line)

    def request(self, **message) -> dict:
        self.send(message)
        return self.read()

    def close(self) -> None:
        self.sock.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture(scope="module")
def worker():
    w = WorkerProc(FIXTURES / "tools" / "testing")
    yield w
    w.close()


def test_handshake_lists_tools_with_schemas(worker):
    hs = worker.handshake
    assert hs["op"] == "ready" and hs["protocol"] == 2 and hs["namespace"] == "testing"
    tools = {t["name"]: t for t in hs["tools"]}
    assert {"slow", "aslow", "boom", "env_keys", "pid", "probe", "echo"} <= set(tools)
    assert tools["slow"]["inputSchema"]["properties"]["seconds"]["type"] == "number"
    assert tools["slow"]["description"].startswith("Sleep in a thread")


def test_call_list_and_schema(worker):
    reply = worker.request(id="1", op="tools.call", tool="echo", arguments={"value": {"k": [1, 2]}})
    assert reply["ok"] and reply["id"] == "1"
    assert reply["result"]["structuredContent"] == {"k": [1, 2]}
    assert isinstance(reply["latency_ms"], int)
    listed = worker.request(id="2", op="tools.list")
    assert [t["name"] for t in listed["result"]["tools"]] == [t["name"] for t in worker.handshake["tools"]]
    schema = worker.request(id="3", op="tools.get_schema", tool="echo")
    assert schema["result"]["name"] == "echo"
    assert worker.request(id="4", op="ping")["result"]["pong"] is True


@pytest.mark.parametrize(
    "message, code",
    [
        ({"op": "tools.call", "tool": "nope", "arguments": {}}, "tool_not_found"),
        ({"op": "tools.get_schema", "tool": "nope"}, "tool_not_found"),
        ({"op": "tools.call", "tool": "slow", "arguments": {"seconds": "soon"}}, "invalid_arguments"),
        ({"op": "tools.call", "tool": "slow", "arguments": {}}, "invalid_arguments"),
        ({"op": "tools.call", "tool": "slow", "arguments": [1]}, "invalid_arguments"),
        ({"op": "tools.call", "tool": "boom", "arguments": {"message": "kaput"}}, "internal_error"),
        ({"op": "frobnicate"}, "internal_error"),
    ],
)
def test_error_codes(worker, message, code):
    reply = worker.request(id="e", **message)
    assert reply["ok"] is False and reply["error"]["code"] == code, reply
    assert reply["error"]["message"]


def test_tool_exception_keeps_its_type_and_message(worker):
    reply = worker.request(id="b", op="tools.call", tool="boom", arguments={"message": "kaput"})
    assert reply["error"]["message"] == "ValueError: kaput"
    details = reply["error"]["details"]
    assert set(details) == {"exception", "traceback"} and details["exception"] == "ValueError"
    # The traceback (for the manager's test_tool; the gateway drops it for other callers) ends in the tool.
    assert details["traceback"].startswith("Traceback") and details["traceback"].endswith("ValueError: kaput\n")
    # It starts at the tool's own frame: the worker's, fastmcp's and pydantic's frames above it say nothing.
    first_frame = details["traceback"].splitlines()[1]
    assert first_frame.startswith('  File "') and "/testing/ops.py" in first_frame, details["traceback"]
    assert "fastmcp" not in details["traceback"] and "tooldock/worker" not in details["traceback"]


def test_a_tracebacks_frames_below_the_tool_are_kept(tmp_path):
    """The library the tool called (json here) is where the error was raised: its frames stay."""
    (tmp_path / "parse.py").write_text(
        "import json\n\nfrom fastmcp.tools import tool\n\n\n@tool\ndef parse(text: str) -> dict:\n"
        "    'Parse.'\n    return json.loads(text)\n"
    )
    w = WorkerProc(tmp_path, ["parse.py"])
    try:
        reply = w.request(id="j", op="tools.call", tool="parse", arguments={"text": "{nope"})
        shown = reply["error"]["details"]["traceback"]
        frames = [line for line in shown.splitlines() if line.startswith('  File "')]
        assert str(tmp_path / "parse.py") in frames[0] and "json" in frames[-1] and len(frames) >= 3, shown
    finally:
        w.close()


def test_requests_are_multiplexed_and_a_slow_tool_does_not_block_ping(worker):
    worker.send({"id": "slow", "op": "tools.call", "tool": "slow", "arguments": {"seconds": 1.0}})
    worker.send({"id": "p", "op": "ping"})
    first, second = worker.read(), worker.read()
    assert (first["id"], second["id"]) == ("p", "slow")


def test_cancel_stops_an_async_call(worker):
    worker.send({"id": "long", "op": "tools.call", "tool": "aslow", "arguments": {"seconds": 30}})
    worker.send({"op": "cancel", "target": "long"})
    started = time.monotonic()
    assert worker.request(id="after", op="ping")["id"] == "after"
    assert time.monotonic() - started < 5


def test_malformed_line_is_answered_and_the_connection_survives(worker):
    worker.send(b"{not json\n")
    assert worker.read()["error"]["code"] == "internal_error"
    assert worker.request(id="ok", op="ping")["ok"] is True


def test_import_failures_are_reported_and_other_files_load():
    w = WorkerProc(FIXTURES / "tools" / "broken-file", ["good.py", "import_fails.py"])
    try:
        assert [t["name"] for t in w.handshake["tools"]] == ["still_works"]
        (failed,) = w.handshake["failed_files"]
        assert failed["file"] == "import_fails.py" and failed["code"] == "dependency_error"
        assert "requirements.txt" in failed["message"] and failed["line"] == 1
    finally:
        w.close()


def test_a_file_that_calls_sys_exit_at_import_is_reported_and_other_files_load(tmp_path):
    """sys.exit() is SystemExit, not an Exception: it used to end the worker before it was ready (a crash
    loop, the whole namespace down, its message lost)."""
    shutil.copy(FIXTURES / "tools" / "broken-file" / "good.py", tmp_path / "good.py")
    (tmp_path / "exits.py").write_text('import sys\n\nsys.exit("config missing, bailing out")\n')
    w = WorkerProc(tmp_path, ["exits.py", "good.py"])
    try:
        assert [t["name"] for t in w.handshake["tools"]] == ["still_works"]
        (failed,) = w.handshake["failed_files"]
        assert failed["file"] == "exits.py" and failed["line"] == 3
        assert failed["message"] == "import failed: the file called sys.exit('config missing, bailing out')"
    finally:
        w.close()


def test_a_tool_that_breaks_a_rule_is_left_out_and_the_rest_of_its_file_is_served():
    """No docstring, or *args (which fastmcp refuses outright, failing the whole file when it builds it):
    the worker leaves out what the gateway's scan reports, and serves the file's valid tool."""
    w = WorkerProc(FIXTURES / "tools" / "broken-file", ["half_good.py"])
    try:
        assert [t["name"] for t in w.handshake["tools"]] == ["half_served"]
        assert w.handshake["failed_files"] == []
    finally:
        w.close()


def test_a_tool_whose_decorator_makes_no_tool_is_reported_not_silently_left_out(tmp_path):
    """A look-alike `@tool` (the file's own helper here; the static reading trusts it) that does not make a
    fastmcp tool: the function was missing from the namespace with no word why."""
    (tmp_path / "_helpers.py").write_text("def tool(fn):\n    return fn\n")
    (tmp_path / "mixed.py").write_text(
        "import fastmcp.tools\nfrom _helpers import tool\n\n\n"
        "@fastmcp.tools.tool\ndef served(x: int) -> int:\n    'D.'\n    return x\n\n\n"
        "@tool\ndef lookalike(x: int) -> int:\n    'D.'\n    return x\n"
    )
    w = WorkerProc(tmp_path, ["mixed.py"])
    try:
        assert [t["name"] for t in w.handshake["tools"]] == ["served"]
        (failed,) = w.handshake["failed_files"]
        assert failed["file"] == "mixed.py" and failed["line"] == 12 and failed["code"] == "not_a_tool"
        assert failed["message"].startswith("tool 'lookalike': its decorator did not make it a fastmcp tool")
    finally:
        w.close()


def test_a_tool_fastmcp_cannot_make_costs_only_itself_and_is_named(tmp_path):
    """A return type pydantic refuses (`typing.TypedDict` before Python 3.12) and a resource template whose
    function does not take its URI's parameter: fastmcp raises when it makes them. That failed the whole
    file, with no tool named and no line; now the file's other tools, resources and prompts are served."""
    (tmp_path / "mixed.py").write_text(
        "from typing import TypedDict\n"
        "from fastmcp.resources import resource\n"
        "from fastmcp.tools import tool\n\n\n"
        "class Row(TypedDict):\n    k: str\n\n\n"
        "@tool\ndef good(x: int) -> int:\n    'D.'\n    return x\n\n\n"
        "@tool\ndef bad() -> Row:\n    'D.'\n    return {'k': 'v'}\n\n\n"
        "@resource('data://{uid}')\ndef wrong(other: int) -> str:\n    return 'x'\n\n\n"
        "@resource('data://fine')\ndef fine() -> str:\n    return 'x'\n"
    )
    w = WorkerProc(tmp_path, ["mixed.py"])
    try:
        assert [t["name"] for t in w.handshake["tools"]] == ["good"]
        by_line = {f["line"]: f for f in w.handshake["failed_files"]}
        assert sorted(by_line) == [17, 22], w.handshake["failed_files"]
        assert by_line[17]["code"] == by_line[22]["code"] == "invalid_tool"
        assert by_line[17]["message"].startswith("tool 'bad' cannot be served: Please use `typing_extensions.TypedDict`")
        assert by_line[22]["message"].startswith("resource 'wrong' cannot be served: ")
        assert "\n" not in by_line[17]["message"] and "errors.pydantic.dev" not in by_line[17]["message"]
        reply = w.request(id="1", op="tools.call", tool="good", arguments={"x": 4})
        assert reply["result"]["structuredContent"] == {"result": 4}
    finally:
        w.close()


def test_a_worker_inlines_its_schemas_refs_only_when_the_gateway_lists_them_so(tmp_path):
    """TOOLDOCK_INLINE_SCHEMA_REFS: the inlined schemas travel in the handshake beside the declared ones, for
    the tools that have `$ref`s; without it nothing is inlined (jsonref, which does it, costs 80 ms to import)."""
    (tmp_path / "models.py").write_text(
        "import enum\nfrom fastmcp.tools import tool\n\n\nclass Color(enum.Enum):\n    RED = 'red'\n\n\n"
        "@tool\ndef paint(c: Color) -> str:\n    'D.'\n    return c.value\n\n\n"
        "@tool\ndef plain(x: int) -> int:\n    'D.'\n    return x\n"
    )
    for env, inlined in (({}, None), ({"TOOLDOCK_INLINE_SCHEMA_REFS": "true"}, ["paint"])):
        w = WorkerProc(tmp_path, ["models.py"], env)
        try:
            declared = {t["name"]: t for t in w.handshake["tools"]}
            assert declared["paint"]["inputSchema"]["properties"]["c"] == {"$ref": "#/$defs/Color"}
            flat = w.handshake.get("inlined_tools")
            assert ([t["name"] for t in flat] if flat else None) == inlined
            if flat:
                assert flat[0]["inputSchema"]["properties"]["c"] == {"enum": ["red"], "type": "string"}
                assert {k: v for k, v in flat[0].items() if k != "inputSchema"} == {
                    k: v for k, v in declared["paint"].items() if k != "inputSchema"
                }
        finally:
            w.close()


def test_a_missing_submodule_of_an_installed_package_does_not_ask_for_the_package(tmp_path):
    """`import fastmcp.nope`: fastmcp is installed, so 'add the package to requirements.txt' (the advice for a
    missing package) sent the author the wrong way."""
    (tmp_path / "sub.py").write_text("import fastmcp.no_such_part\n")
    shutil.copy(FIXTURES / "tools" / "broken-file" / "good.py", tmp_path / "good.py")
    w = WorkerProc(tmp_path, ["sub.py", "good.py"])
    try:
        (failed,) = w.handshake["failed_files"]
        assert failed["code"] == "import_error" and "requirements.txt pins" in failed["message"]
        assert failed["message"].startswith("import failed: No module named 'fastmcp.no_such_part' (the installed 'fastmcp'")
    finally:
        w.close()


def test_shutdown_exits_cleanly():
    w = WorkerProc(FIXTURES / "tools" / "limited")
    assert w.request(id="s", op="shutdown")["result"] == {"stopping": True}
    assert w.proc.wait(10) == 0
    assert not w.socket.exists()


def test_sigterm_exits_cleanly():
    """How a supervisor stops a worker that does not answer `shutdown`: exit 0, no traceback, no socket left."""
    w = WorkerProc(FIXTURES / "tools" / "limited")
    assert w.request(id="p", op="ping")["result"]["pong"] is True
    w.file.close()
    w.sock.close()  # with no connection left, no task is pending when the worker stops
    time.sleep(0.2)
    w.proc.terminate()
    assert w.proc.wait(10) == 0
    assert "Traceback" not in w.proc.stderr.read().decode()
    assert not w.socket.exists()


def test_describe_prints_tools_json():
    out = subprocess.run(
        [sys.executable, "-m", "tooldock.worker", "--dir", str(FIXTURES / "tools" / "limited"), "--describe"],
        capture_output=True, check=True, text=True,
    ).stdout
    data = json.loads(out)
    assert data["namespace"] == "limited" and [t["name"] for t in data["tools"]] == ["nap", "probe"]


def test_the_worker_server_finds_plain_tools_directly_and_leaves_the_rest_to_fastmcp():
    import asyncio

    from fastmcp import FastMCP
    from fastmcp.tools import FunctionTool

    from tooldock.worker.guard import GuardServer

    def add(a: int, b: int) -> int:
        return a + b

    def guarded(a: int) -> int:
        return a

    def old(a: int) -> int:
        return a

    server = GuardServer("ns")
    server.add_tool(FunctionTool.from_function(add))
    server.add_tool(FunctionTool.from_function(guarded, auth=lambda ctx: False))
    server.add_tool(FunctionTool.from_function(old, version="1"))

    async def main() -> None:
        direct = await server.get_tool("add")
        assert direct is not None and direct == await FastMCP.get_tool(server, "add")
        assert await server.get_tool("guarded") is None  # its auth check still runs (and refuses)
        assert (await server.get_tool("old")).version == "1"  # a versioned tool: fastmcp resolves it
        assert await server.get_tool("nope") is None
        assert (await server.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}

    asyncio.run(main())


def test_fastmcps_own_spans_are_off_in_a_worker_unless_its_environment_says(monkeypatch):
    import fastmcp

    from tooldock.worker.__main__ import quiet_telemetry

    monkeypatch.setattr(fastmcp.settings, "telemetry_mode", "native")
    monkeypatch.setenv("FASTMCP_TELEMETRY_MODE", "native")
    quiet_telemetry()
    assert fastmcp.settings.telemetry_mode == "native"
    monkeypatch.delenv("FASTMCP_TELEMETRY_MODE")
    quiet_telemetry()
    assert fastmcp.settings.telemetry_mode == "off"


def test_a_context_tool_result_is_passed_on_as_a_plain_tools_is(tmp_path):
    """The worker's in-memory client does not re-check results against the output schema (plain tools,
    run without a client, never were): both kinds return what the tool returned."""
    folder = tmp_path / "loose"
    folder.mkdir()
    (folder / "loose.py").write_text(
        "from fastmcp import Context\nfrom fastmcp.tools import tool\n\n\n"
        "@tool\ndef plain(x: str) -> int:\n    \"\"\"Claims an int, returns what it got.\n\n"
        "    Args:\n        x: Anything.\n    \"\"\"\n    return x  # type: ignore[return-value]\n\n\n"
        "@tool\nasync def with_context(x: str, ctx: Context) -> int:\n    \"\"\"The same, with a Context.\n\n"
        "    Args:\n        x: Anything.\n    \"\"\"\n    await ctx.report_progress(1, 1)\n"
        "    return x  # type: ignore[return-value]\n"
    )
    worker = WorkerProc(folder)
    try:
        for i, name in enumerate(("plain", "with_context")):
            reply = worker.request(id=str(i), op="tools.call", tool=name, arguments={"x": "seven"})
            assert reply["ok"], reply
            assert reply["result"]["structuredContent"] == {"result": "seven"}
    finally:
        worker.close()


def test_a_context_tools_failure_carries_its_traceback_and_bad_arguments_are_refused(tmp_path):
    """fastmcp answers a Context tool's exception with an `isError` result; the worker still gives what a
    plain tool's failure gives: the exception's type and its traceback from the tool's own frame (for the
    manager's test_tool). Before, a Context tool's failure had no details at all."""
    (tmp_path / "ctxfail.py").write_text(
        "from fastmcp import Context\nfrom fastmcp.tools import tool\n\n\n"
        "@tool\nasync def explode(n: int, ctx: Context) -> int:\n    'Explodes.'\n"
        "    await ctx.report_progress(1, 1)\n    return 1 // n\n"
    )
    w = WorkerProc(tmp_path, ["ctxfail.py"])
    try:
        error = w.request(id="z", op="tools.call", tool="explode", arguments={"n": 0})["error"]
        assert error["code"] == "internal_error" and "division" in error["message"]
        assert error["details"]["exception"] == "ZeroDivisionError"
        shown = error["details"]["traceback"]
        assert shown.splitlines()[1].startswith(f'  File "{tmp_path / "ctxfail.py"}"'), shown
        assert shown.endswith("ZeroDivisionError: integer division or modulo by zero\n")
        assert "fastmcp" not in shown
        refused = w.request(id="x", op="tools.call", tool="explode", arguments={"n": "many"})["error"]
        assert refused["code"] == "invalid_arguments" and "details" not in refused
    finally:
        w.close()


OWN_TIMEOUTS = (
    "import asyncio\nimport time\n\nfrom fastmcp import Context\nfrom fastmcp.exceptions import MCPError\n"
    "from fastmcp.tools import tool\n\n\n"
    "@tool(timeout=0.3)\ndef nap(seconds: float) -> str:\n    \"\"\"Sleeps in a thread.\"\"\"\n"
    "    time.sleep(seconds)\n    return 'awake'\n\n\n"
    "@tool(timeout=0.3)\nasync def anap(seconds: float) -> str:\n    \"\"\"Sleeps on the loop.\"\"\"\n"
    "    await asyncio.sleep(seconds)\n    return 'awake'\n\n\n"
    "@tool(timeout=0.3)\nasync def cnap(seconds: float, ctx: Context) -> str:\n    \"\"\"Sleeps with a Context.\"\"\"\n"
    "    await ctx.report_progress(1, 1)\n    await asyncio.sleep(seconds)\n    return 'awake'\n\n\n"
    "@tool(timeout=5)\ndef refuses() -> str:\n    \"\"\"Raises its own -32000 with other words.\"\"\"\n"
    "    raise MCPError(code=-32000, message='quota used up')\n"
)


def test_a_tool_that_outruns_its_own_timeout_is_an_execution_timeout(tmp_path):
    """`@tool(timeout=...)` is fastmcp's, and it answers with an MCPError; the worker answers it as the
    gateway's own time limit is answered (`execution_timeout`, REST's 504), for sync, async and Context
    tools alike. Before, it was `internal_error` (500). A tool's own -32000 with other words stays its own."""
    (tmp_path / "timeouts.py").write_text(OWN_TIMEOUTS)
    w = WorkerProc(tmp_path, ["timeouts.py"])
    try:
        for i, name in enumerate(("nap", "anap", "cnap")):
            error = w.request(id=str(i), op="tools.call", tool=name, arguments={"seconds": 3})["error"]
            assert error["code"] == "execution_timeout", (name, error)
            assert "@tool(timeout=0.3)" in error["message"], error
            fast = w.request(id=f"f{i}", op="tools.call", tool=name, arguments={"seconds": 0})
            assert fast["ok"] and fast["result"]["structuredContent"] == {"result": "awake"}, fast
        own = w.request(id="own", op="tools.call", tool="refuses", arguments={})["error"]
        assert own["code"] == "internal_error" and own["message"] == "quota used up", own
    finally:
        w.close()


BRIDGE_PROBE = (
    "import sys\n\nfrom fastmcp import Context\nfrom fastmcp.tools import tool\n\n\n"
    "@tool\ndef bridge_loaded() -> bool:\n    \"\"\"Whether the worker imported its bridge.\"\"\"\n"
    "    return 'tooldock.worker.bridge' in sys.modules\n"
)
CONTEXT_TOOL = (
    "\n\n@tool\nasync def steps(ctx: Context) -> int:\n    \"\"\"Reports progress.\"\"\"\n"
    "    await ctx.report_progress(1, 1)\n    return 1\n"
)


def _bridge_loaded(w: WorkerProc, waited: float) -> bool:
    """Whether the worker has its bridge imported, asked (with no Context call) until `waited` seconds pass."""
    deadline = time.monotonic() + waited
    while True:
        reply = w.request(id="b", op="tools.call", tool="bridge_loaded", arguments={})
        if reply["result"]["structuredContent"]["result"] or time.monotonic() > deadline:
            return reply["result"]["structuredContent"]["result"]
        time.sleep(0.05)


def test_a_worker_with_context_tools_imports_its_bridge_in_the_background_once_it_serves(tmp_path):
    """A spawned worker (a container's) whose namespace has a Context tool imports the bridge after its ready
    line, before any call needs it, so the first Context call does not pay the import; a namespace of plain
    tools never imports it (its memory and start-up stay those of a plain worker)."""
    plain, with_context = tmp_path / "plain", tmp_path / "withctx"
    plain.mkdir(), with_context.mkdir()
    (plain / "probe.py").write_text(BRIDGE_PROBE)
    (with_context / "probe.py").write_text(BRIDGE_PROBE + CONTEXT_TOOL)
    w = WorkerProc(with_context)
    try:
        assert _bridge_loaded(w, 30), "the bridge was not imported after the worker started serving"
        started = time.monotonic()
        assert w.request(id="s", op="tools.call", tool="steps", arguments={})["ok"]
        assert time.monotonic() - started < 5
    finally:
        w.close()
    w = WorkerProc(plain)
    try:
        assert _bridge_loaded(w, 1.5) is False
    finally:
        w.close()


VERSIONED = '''from fastmcp.tools import tool


@tool(name="calc", version="{v}")
def calc_v{v}(x: int) -> int:
    """Version {v}."""
    return x * {v}
'''


def test_versions_of_a_tool_serve_the_highest_as_fastmcp_does(tmp_path):
    # fastmcp 4's `@tool(version=...)`: one tool, the highest version listed and run (the first was, with a
    # "duplicate tool name" line); versions of a name spread over files are one tool too, and a call that
    # asks for a version runs that one.
    (tmp_path / "a.py").write_text(VERSIONED.format(v=3) + VERSIONED.format(v=1).split("\n", 1)[1])
    (tmp_path / "b.py").write_text(VERSIONED.format(v=2))
    w = WorkerProc(tmp_path, ["a.py", "b.py"])
    try:
        assert [(t["name"], t["description"]) for t in w.handshake["tools"]] == [("calc", "Version 3.")]
        # listed with the version served and all of them, as FastMCP lists it
        assert w.handshake["tools"][0]["_meta"] == {"fastmcp": {"version": "3", "versions": ["3", "2", "1"]}}
        assert w.handshake["failed_files"] == []
        reply = w.request(id="1", op="tools.call", tool="calc", arguments={"x": 5})
        assert reply["result"]["structuredContent"] == {"result": 15}
        for rid, version, answer in (("2", "1", 5), ("3", "2", 10), ("4", "3", 15)):
            reply = w.request(id=rid, op="tools.call", tool="calc", arguments={"x": 5}, version=version)
            assert reply["result"]["structuredContent"] == {"result": answer}, reply
        reply = w.request(id="5", op="tools.call", tool="calc", arguments={"x": 5}, version="9")
        assert reply["error"] == {"code": "tool_not_found", "message": "tool 'calc' has no version '9'"}
    finally:
        w.close()


def test_two_unversioned_tools_of_one_name_are_still_a_duplicate(tmp_path):
    plain = VERSIONED.replace(', version="{v}"', "")
    (tmp_path / "a.py").write_text(plain.format(v=1) + plain.format(v=2).split("\n", 1)[1])
    w = WorkerProc(tmp_path, ["a.py"])
    try:
        # the first is served; the second is the scan's `duplicate_tool` problem (test_validate.py)
        assert [(t["name"], t["description"]) for t in w.handshake["tools"]] == [("calc", "Version 1.")]
    finally:
        w.close()


OLD_VERSION_TIMES_OUT = '''import time

from fastmcp.tools import tool


@tool(name="nap", version=1, timeout=0.3)
def nap_v1(seconds: float) -> str:
    """Version 1, with a time limit."""
    time.sleep(seconds)
    return "v1"


@tool(name="nap", version=2)
def nap_v2(seconds: float) -> str:
    """Version 2, without one."""
    return "v2"
'''


def test_an_older_version_that_outruns_its_own_timeout_is_an_execution_timeout(tmp_path):
    """The version a call asked for is the one whose `@tool(timeout=...)` it outran (not the highest's)."""
    (tmp_path / "naps.py").write_text(OLD_VERSION_TIMES_OUT)
    w = WorkerProc(tmp_path, ["naps.py"])
    try:
        error = w.request(id="1", op="tools.call", tool="nap", arguments={"seconds": 3}, version="1")["error"]
        assert error["code"] == "execution_timeout" and "@tool(timeout=0.3)" in error["message"], error
    finally:
        w.close()
