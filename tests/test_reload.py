"""Reloads: only changed namespaces restart; the snapshot swaps atomically; guarded HTTP and SIGHUP."""

from __future__ import annotations

import re
import shutil
import signal

from conftest import EXAMPLES, FIXTURES, tooldock_cli

MANAGER = "manager-token-abcdef"


def test_reload_restarts_only_changed_namespaces(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER})
    pids = {n: gw.namespace(n)["pid"] for n in ("basic-tool", "multi-tool")}
    hello = gw.tools_dir / "basic-tool" / "hello.py"
    hello.write_text(hello.read_text().replace('f"Hello, {name}!"', 'f"Howdy, {name}!"'))
    shutil.copytree(FIXTURES / "tools" / "limited", gw.tools_dir / "limited")
    shutil.rmtree(gw.tools_dir / "async-tool")

    report = gw.post("/reload", headers={"X-Manager-Token": MANAGER})
    assert report.status_code == 200, report.text
    body = report.json()
    gw.conforms("/reload", "post", body)  # what the gateway's OpenAPI document says it answers
    assert body["reloaded"] is True
    assert body["workers_restarted"] == ["basic-tool", "limited"]
    assert body["removed"] == ["async-tool"]
    assert body["namespaces"] == ["basic-tool", "limited", "multi-tool"]
    assert gw.call("basic-tool", "say_hello", name="Ada").json() == {"result": "Howdy, Ada!"}
    assert gw.namespace("multi-tool")["pid"] == pids["multi-tool"]
    assert gw.namespace("basic-tool")["pid"] != pids["basic-tool"]
    assert gw.get("/tools", "async-tool").status_code == 404
    assert gw.call("limited", "nap", seconds=0).json() == {"result": "awake"}


def test_reload_guards(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER, "INTERNAL_ALLOWED_CIDRS": "10.9.9.0/24"})
    wrong = gw.post("/reload", headers={"X-Manager-Token": "not-it"})
    assert wrong.status_code == 403 and "X-Manager-Token" in wrong.json()["error"]["message"]
    missing = gw.post("/reload")
    assert missing.status_code == 403
    # Right token, but 127.0.0.1 is not in the allowed networks.
    outside = gw.post("/reload", headers={"X-Manager-Token": MANAGER})
    assert outside.status_code == 403 and "INTERNAL_ALLOWED_CIDRS" in outside.json()["error"]["message"]


def test_broken_edit_keeps_the_old_version_serving(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER, "TOOLDOCK_RESTART_BACKOFF": "0.05"})
    (gw.tools_dir / "multi-tool" / "dies.py").write_text((FIXTURES / "crashy" / "crashy" / "dies.py").read_text())
    body = gw.post("/reload", headers={"X-Manager-Token": MANAGER}).json()
    assert "multi-tool" in body["failed"]
    gw.conforms("/reload", "post", body)
    gw.conforms("/namespaces", "get", gw.get("/namespaces").json())
    ns = gw.namespace("multi-tool")
    assert ns["state"] == "ready" and "crash loop" in ns["reload_error"]
    assert gw.call("multi-tool", "add", a=2, b=2).json() == {"result": 4}


def test_sighup_reloads(make_gateway):
    gw = make_gateway(EXAMPLES)
    shutil.copytree(FIXTURES / "tools" / "limited", gw.tools_dir / "limited")
    generation = gw.get("/health").json()["generation"]
    gw.proc.send_signal(signal.SIGHUP)
    gw.wait_for(lambda: gw.get("/health").json()["generation"] > generation, what="the SIGHUP reload")
    assert [t["name"] for t in gw.get("/tools", "limited").json()["tools"]] == ["nap", "probe"]
    # the signal's sender reads the outcome on the gateway's stderr
    gw.wait_for(lambda: "tooldock: SIGHUP: reloaded in" in gw.logs, 10, "the reload's line")
    assert re.search(r"tooldock: SIGHUP: reloaded in \d+\.\d\ds: restarted limited\n", gw.logs), gw.logs[-2000:]


def test_watch_makes_edits_live_and_says_what_each_reload_did(make_gateway):
    """`serve --watch`: an edit by hand is live once saved, without a signal; a new folder, an edit, a
    broken edit (the previous version keeps serving), a removed folder: each burst is one reload and one
    line on stderr. Dot-files (editors' swap files) and __pycache__ are not edits."""
    gw = make_gateway(EXAMPLES, args=("--watch",), env={"FS_WATCHER_DEBOUNCE_MS": "200"})
    assert f"tooldock: watching {gw.tools_dir.resolve()}" in gw.logs and "(debounce 200 ms)" in gw.logs
    shutil.copytree(FIXTURES / "tools" / "limited", gw.tools_dir / "limited")
    gw.wait_for(lambda: gw.call("limited", "nap", seconds=0).status_code == 200, 60, "the new namespace")
    assert gw.call("limited", "nap", seconds=0).json() == {"result": "awake"}

    (gw.tools_dir / "basic-tool" / ".hello.py.swp").write_text("an editor's swap file")
    hello = gw.tools_dir / "basic-tool" / "hello.py"
    good = hello.read_text()
    hello.write_text(good.replace('f"Hello, {name}!"', 'f"Howdy, {name}!"'))
    gw.wait_for(lambda: gw.call("basic-tool", "say_hello", name="Ada").json() == {"result": "Howdy, Ada!"},
                30, "the edit")
    gw.wait_for(lambda: "changed: basic-tool/hello.py: reloaded in" in gw.logs, 10, "the edit's line")

    hello.write_text(good + "\ndef half_written(:\n")
    gw.wait_for(lambda: "failed: basic-tool: invalid files (hello.py" in gw.logs, 30, "the broken edit's line")
    assert gw.call("basic-tool", "say_hello", name="Ada").json() == {"result": "Howdy, Ada!"}
    assert "previous version keeps serving" in gw.namespace("basic-tool")["reload_error"]

    shutil.rmtree(gw.tools_dir / "multi-tool")
    gw.wait_for(lambda: gw.get("/tools", "multi-tool").status_code == 404, 30, "the removal")
    gw.wait_for(lambda: "removed multi-tool" in gw.logs, 10, "the removal's line")
    assert ".swp" not in gw.logs and "__pycache__" not in gw.logs


def test_watch_on_the_docker_backend_needs_the_manager(tmp_path):
    """On the docker backend an edit means nothing until it is built into an image (the manager's job)."""
    proc = tooldock_cli("serve", str(tmp_path), "--backend", "docker", "--watch", "--port", "0", check=False)
    assert proc.returncode != 0
    assert "--watch on the docker backend needs --manager" in proc.stderr and "Traceback" not in proc.stderr


def test_reload_of_a_vanished_tools_dir_keeps_serving(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER})
    shutil.rmtree(gw.tools_dir)
    reply = gw.post("/reload", headers={"X-Manager-Token": MANAGER})
    assert reply.status_code == 500
    error = reply.json()["error"]
    assert error["code"] == "reload_failed" and "still serving" in error["message"]
    assert gw.call("multi-tool", "add", a=1, b=1).json() == {"result": 2}


def test_open_mcp_sessions_hear_tools_list_changed(make_gateway):
    """A reload that changes a namespace's tools notifies its open MCP sessions; one that changes only
    behaviour does not."""
    import asyncio

    import httpx2
    import mcp_types as types
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER})
    heard: list[str] = []

    async def on_message(message) -> None:
        if isinstance(message, types.ServerNotification):
            heard.append(message.method if hasattr(message, "method") else message.root.method)

    async def main() -> tuple[list[str], list[str]]:
        async with httpx2.AsyncClient(headers=gw.headers("multi-tool"), timeout=60) as http:
            async with streamable_http_client(f"{gw.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as session:
                    init = await session.initialize()
                    assert init.capabilities.tools.list_changed is True
                    await session.list_tools()
                    (gw.tools_dir / "multi-tool" / "more_tools.py").write_text(
                        "from fastmcp.tools import tool\n\n@tool\ndef negate(x: float) -> float:\n"
                        '    """Negate x."""\n    return -x\n')
                    await asyncio.to_thread(gw.post, "/reload", headers={"X-Manager-Token": MANAGER})
                    for _ in range(100):
                        if len(heard) >= 3:
                            break
                        await asyncio.sleep(0.05)
                    after = [t.name for t in (await session.list_tools()).tools]
                    return list(heard), after

    notified, tools = asyncio.run(main())
    # Every list a client may hold is announced (the lists are re-read by the client, so one extra
    # notice costs a request, while a missing one leaves a stale list).
    assert notified == [
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    ]
    assert "negate" in tools


def test_2026_07_28_listeners_hear_list_changes(make_gateway):
    """2026-07-28 has no sessions: a client opens `subscriptions/listen` and gets the kinds it asked for."""
    import asyncio

    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER})

    async def main() -> tuple[list[str], list[str], str]:
        async with httpx2.AsyncClient(headers=gw.headers("multi-tool"), timeout=60) as http:
            transport = streamable_http_client(f"{gw.url}/mcp", http_client=http)
            async with Client(transport) as client:
                async with client.listen(tools_list_changed=True) as subscription:
                    (gw.tools_dir / "multi-tool" / "more_tools.py").write_text(
                        "from fastmcp.tools import tool\n\n@tool\ndef negate(x: float) -> float:\n"
                        '    """Negate x."""\n    return -x\n')
                    await asyncio.to_thread(gw.post, "/reload", headers={"X-Manager-Token": MANAGER})
                    async with asyncio.timeout(30):
                        event = await subscription.__anext__()
                tools = [t.name for t in (await client.list_tools()).tools]
                return [type(event).__name__], tools, client.protocol_version

    events, tools, version = asyncio.run(main())
    assert version == "2026-07-28"
    assert events == ["ToolsListChanged"]  # only the kind it asked for
    assert "negate" in tools


def test_an_edit_that_breaks_a_file_keeps_the_old_version_and_says_why(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER})
    math_tools = gw.tools_dir / "multi-tool" / "math_tools.py"
    good = math_tools.read_text()
    math_tools.write_text(good.replace("def add(a: float, b: float)", "def add(a, b: float)"))
    body = gw.post("/reload", headers={"X-Manager-Token": MANAGER}).json()
    assert "math_tools.py" in body["failed"]["multi-tool"] and "no type hint" in body["failed"]["multi-tool"]
    assert "multi-tool" not in body["workers_restarted"]
    ns = gw.namespace("multi-tool")
    assert ns["state"] == "ready" and "previous version keeps serving" in ns["reload_error"]
    assert gw.call("multi-tool", "add", a=2, b=2).json() == {"result": 4}
    math_tools.write_text(good)  # put back: served as before, the error gone
    body = gw.post("/reload", headers={"X-Manager-Token": MANAGER}).json()
    assert body["failed"] == {} and "reload_error" not in gw.namespace("multi-tool")


def test_a_reload_names_what_is_wrong_in_the_namespaces_it_started(make_gateway):
    """A new namespace whose files are broken is reported by the reload itself (a manager's LLM reads
    `reload_core`'s answer, not /namespaces): one that serves nothing under `failed`, one that serves its
    other files under `problems`."""
    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER})
    tools = gw.tools_dir
    for name in ("imports", "badtoml", "badyaml", "fresh"):
        (tools / name).mkdir()
    shutil.copy(EXAMPLES / "basic-tool" / "hello.py", tools / "imports" / "hello.py")
    (tools / "imports" / "needs.py").write_text(
        "import no_such_module_here\nfrom fastmcp.tools import tool\n\n@tool\ndef f() -> int:\n    \"\"\"F.\"\"\"\n    return 1\n")
    (tools / "badtoml" / "tools.toml").write_text("[[servers]]\nnamespace = \n")
    shutil.copy(EXAMPLES / "basic-tool" / "hello.py", tools / "badyaml" / "hello.py")
    (tools / "badyaml" / "tooldock.yaml").write_text("limits: {timeout: -3}\n")
    body = gw.post("/reload", headers={"X-Manager-Token": MANAGER}).json()
    gw.conforms("/reload", "post", body)
    assert body["failed"] == {
        "badtoml": "tools.toml:2: invalid TOML: Invalid value (at line 2, column 13)",
        "badyaml": "tooldock.yaml: 'limits.timeout' must be a positive number (at most 1e+09)",
    }
    assert body["problems"] == {"imports": [
        "needs.py:1: import failed: No module named 'no_such_module_here'; add the package to the namespace's "
        "requirements.txt"]}
    assert gw.call("imports", "say_hello", name="Ada").json() == {"result": "Hello, Ada!"}
    # an empty new folder is not a failure; an unchanged namespace is not reported again
    again = gw.post("/reload", headers={"X-Manager-Token": MANAGER}).json()
    assert "imports" not in again["problems"] and "fresh" not in again["failed"]


def test_watch_leaves_a_failed_namespace_alone_until_it_changes_or_a_reload_asks(make_gateway, tmp_path):
    """A namespace that failed (here its worker dies while importing) would fail again as it did: an edit
    elsewhere does not start it again (before, every saved edit re-ran it, and repeated its failure, or a
    failing uv run for a requirement that does not install). An edit to it, or POST /reload, retries it."""
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "basic-tool", src / "basic-tool")
    shutil.copytree(FIXTURES / "crashy" / "crashy", src / "crashy")
    gw = make_gateway(src, args=("--watch",), env={"FS_WATCHER_DEBOUNCE_MS": "200", "TOOLDOCK_RESTART_BACKOFF": "0.05",
                                                   "MANAGER_INTERNAL_TOKEN": MANAGER})
    assert "tooldock: crashy: failed: crash loop" in gw.logs and gw.namespace("crashy")["state"] == "crash_loop"
    hello = gw.tools_dir / "basic-tool" / "hello.py"
    hello.write_text(hello.read_text().replace('f"Hello, {name}!"', 'f"Howdy, {name}!"'))
    gw.wait_for(lambda: "changed: basic-tool/hello.py: reloaded in" in gw.logs, 30, "the edit's line")
    line = gw.logs.split("changed: basic-tool/hello.py: ")[1].splitlines()[0]
    assert line.endswith("restarted basic-tool; still failed, unchanged: crashy") and "crash loop" not in line, line
    assert gw.logs.count("crash loop: ") == 1  # said once, at start-up
    assert gw.call("basic-tool", "say_hello", name="Ada").json() == {"result": "Howdy, Ada!"}

    body = gw.post("/reload", headers={"X-Manager-Token": MANAGER}).json()  # asked for: tried again
    assert "crash loop" in body["failed"]["crashy"] and "not_retried" not in body, body
    unasked = gw.post("/reload", params={"retry_failed": "false"}, headers={"X-Manager-Token": MANAGER}).json()
    assert unasked["not_retried"] == ["crashy"] and unasked["failed"] == {}, unasked
    gw.conforms("/reload", "post", unasked)

    dies = gw.tools_dir / "crashy" / "dies.py"
    dies.write_text(dies.read_text().replace("os._exit(3)  # the worker dies while importing: a crash loop\n", ""))
    gw.wait_for(lambda: "changed: crashy/dies.py: reloaded in" in gw.logs, 30, "the fix's line")
    assert gw.call("crashy", "never", x=3).json() == {"result": 3}


def test_start_up_and_watch_lines_name_the_files_a_namespace_leaves_out(make_gateway, tmp_path):
    """A developer reads stderr: a file a namespace leaves out (here `@tool` imported from the wrong
    package) is named at start-up and by the reload that started the namespace. Before, the lines read
    "basic-tool (ready, 1 tools)" and "restarted fresh", silent about the file."""
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "basic-tool", src / "basic-tool")
    wrong = 'from tooldock import tool\n\n\n@tool\ndef wrong(x: int) -> int:\n    """W."""\n    return x\n'
    (src / "basic-tool" / "wrong.py").write_text(wrong)
    gw = make_gateway(src, args=("--watch",), env={"FS_WATCHER_DEBOUNCE_MS": "200"})
    says = "wrong.py:4: 'tooldock' has no @tool decorator; use 'from fastmcp.tools import tool'"
    assert "tooldock: serving 1 namespace(s) from " in gw.logs and f"\ntooldock: basic-tool: {says}\n" in gw.logs
    (gw.tools_dir / "fresh").mkdir()
    shutil.copy(EXAMPLES / "basic-tool" / "hello.py", gw.tools_dir / "fresh" / "hello.py")
    (gw.tools_dir / "fresh" / "wrong.py").write_text(wrong)
    gw.wait_for(lambda: "restarted fresh; fresh leaves out: " in gw.logs, 30, "the new namespace's line")
    assert f"restarted fresh; fresh leaves out: {says}\n" in gw.logs
    assert gw.call("fresh", "say_hello", name="Ada").json() == {"result": "Hello, Ada!"}


def test_an_empty_tools_directory_says_what_a_namespace_is_and_a_new_one_is_served(make_gateway, tmp_path):
    """A first run on an empty folder serves nothing; its start-up line says what to put there, and with
    --watch the first namespace folder is served once saved."""
    (tmp_path / "src").mkdir()
    gw = make_gateway(tmp_path / "src", args=("--watch",), env={"FS_WATCHER_DEBOUNCE_MS": "200"})
    assert "tooldock: serving 0 namespace(s) from " in gw.logs
    assert f"no namespace folders in {gw.tools_dir} yet: a namespace is a folder of tool files, e.g. " in gw.logs
    (gw.tools_dir / "first").mkdir()
    shutil.copy(EXAMPLES / "basic-tool" / "hello.py", gw.tools_dir / "first" / "hello.py")
    gw.wait_for(lambda: gw.call("first", "say_hello", name="Ada").status_code == 200, 30, "the first namespace")
    assert gw.call("first", "say_hello", name="Ada").json() == {"result": "Hello, Ada!"}
