"""`tooldock check`: a tools directory scanned as `serve` would, with nothing started; exit 1 on a problem."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, FIXTURES, TOOLDOCK, tooldock_cli


def test_a_clean_directory_lists_its_tools_and_passes():
    proc = tooldock_cli("check", str(EXAMPLES))
    assert "basic-tool: 1 tool(s) (say_hello)" in proc.stdout.splitlines()
    assert "multi-tool: 4 tool(s) (add, multiply, reverse_text, word_count)" in proc.stdout
    assert "0 problem(s)" in proc.stderr
    report = json.loads(tooldock_cli("check", "--json", str(EXAMPLES)).stdout)
    assert report["ok"] is True and report["problem_count"] == 0 and report["problems"] == []
    assert {n["name"]: n["tools"] for n in report["namespaces"]}["basic-tool"] == ["say_hello"]


def test_problems_are_listed_with_their_lines_and_fail_the_check(tmp_path):
    tools = tmp_path / "tools"
    shutil.copytree(FIXTURES / "tools", tools, ignore=shutil.ignore_patterns("__pycache__"))
    proc = tooldock_cli("check", str(tools), check=False)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert "broken-file: 3 tool(s) (still_works, half_served, needs_dep)" in lines
    assert any(line.startswith("  broken-file/half_good.py:17: tool 'undocumented' has no docstring") for line in lines)
    assert any(line.startswith("not a namespace: Bad_Name/: invalid namespace name") for line in lines)
    report = json.loads(tooldock_cli("check", "--json", str(tools), check=False).stdout)
    broken = next(n for n in report["namespaces"] if n["name"] == "broken-file")
    assert {"file": "bad_syntax.py", "line": 5, "code": "syntax_error", "message": "syntax error: expected ':'"} in broken[
        "problems"
    ]
    assert report["ok"] is False and report["problem_count"] == sum(len(n["problems"]) for n in report["namespaces"]) + 1


def test_a_file_nested_beyond_pythons_limit_is_a_problem_not_a_traceback(tmp_path):
    folder = tmp_path / "tools" / "deep"
    shutil.copytree(EXAMPLES / "basic-tool", folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "deep.py").write_text("X = " + "+".join(["1"] * 5000) + "\n")
    proc = tooldock_cli("check", str(tmp_path / "tools"), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert "  deep/deep.py: the file is nested too deeply to read" in proc.stdout
    assert "deep: 1 tool(s) (say_hello)" in proc.stdout  # the rest of the namespace is served


def test_upstream_folders_list_their_servers_and_a_bad_tools_toml_is_a_problem(tmp_path):
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "tools.toml").write_text('[[servers]]\nnamespace = "time"\ncommand = "uvx mcp-server-time"\n')
    report = json.loads(tooldock_cli("check", "--json", str(tmp_path)).stdout)
    assert report["namespaces"] == [{"name": "up", "problems": [], "servers": ["time"], "warnings": []}]
    (tmp_path / "up" / "tools.toml").write_text('[[servers]]\nnamespace = "time"\n')  # neither command nor url
    proc = tooldock_cli("check", str(tmp_path), check=False)
    assert proc.returncode == 1 and proc.stdout.startswith("up: 0 upstream server(s)\n  up/tools.toml")


FAKE_GITHUB = "ghp_" + "Zq8sX2vLm4Nw7Tb1Rc9Yd3Fh6Jk0Pa5Ue2Gi"  # the shape of a GitHub token; not one
FAKE_KEY = "sk-live-" + "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
FAKE_PASSWORD = "Sup3rS3cret" + "Passw0rd"


def test_credentials_written_into_a_namespace_fail_the_check_and_its_build_never_showing_them(tmp_path):
    """A key written into a tool, its tooldock.yaml or a configuration file beside it would be in every image
    built from the folder (and `env:` values in `docker inspect`): check reports each, build refuses, and
    neither repeats a value. Reading the value from the environment, or a line marked as meant, passes."""
    leaky = tmp_path / "tools" / "leaky"
    leaky.mkdir(parents=True)
    tool = '\n\n@tool\ndef f(a: int) -> int:\n    """Doc."""\n    return a\n'
    (leaky / "t.py").write_text(f'import os\n\nfrom fastmcp.tools import tool\n\nAPI_KEY = "{FAKE_KEY}"\n{tool}')
    (leaky / "tooldock.yaml").write_text(f"env:\n  GITHUB_TOKEN: {FAKE_GITHUB}\n")
    (leaky / "settings.toml").write_text(f'db_url = "postgres://admin:{FAKE_PASSWORD}@db.example.com/x"\n')
    proc = tooldock_cli("check", str(tmp_path / "tools"), check=False)
    assert proc.returncode == 1 and "3 problem(s)" in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("  leaky/settings.toml:1: a credential (a password in a URL) is written into the file")
    assert "declare it in tooldock.yaml (secrets: [DB_URL_PASSWORD]), have the tool read " \
        "os.environ['DB_URL_PASSWORD']" in lines[1]
    assert lines[2].startswith("  leaky/t.py:5: a credential (a literal value for a secret's name)")
    assert "Read it from the environment instead, os.environ['API_KEY']" in lines[2]
    assert "`tooldock secrets set API_KEY --namespace leaky`" in lines[2]
    assert lines[3].startswith("  leaky/tooldock.yaml:2: a credential (a GitHub Token)") and "[GITHUB_TOKEN]" in lines[3]
    report = json.loads(tooldock_cli("check", "--json", str(tmp_path / "tools"), check=False).stdout)
    assert [(p["file"], p["line"], p["code"]) for p in report["namespaces"][0]["problems"]] == [
        ("settings.toml", 1, "hardcoded_secret"), ("t.py", 5, "hardcoded_secret"),
        ("tooldock.yaml", 2, "hardcoded_secret")]
    built = tooldock_cli("build", str(leaky), "--output", str(tmp_path / "out"), check=False)
    assert built.returncode == 1 and "namespace 'leaky' holds credentials, not built:" in built.stderr, built.stderr
    assert "leaky/t.py:5: a credential" in built.stderr and not (tmp_path / "out" / "leaky").exists()
    said = proc.stdout + proc.stderr + built.stdout + built.stderr + json.dumps(report)
    assert FAKE_GITHUB not in said and FAKE_KEY not in said and FAKE_PASSWORD not in said
    # Read from the environment, or marked as meant to be there: nothing to report.
    (leaky / "t.py").write_text(f'import os\n\nfrom fastmcp.tools import tool\n\nAPI_KEY = os.environ["API_KEY"]\n{tool}')
    (leaky / "tooldock.yaml").write_text("secrets: [GITHUB_TOKEN]\n")
    (leaky / "settings.toml").write_text(f'public = "{FAKE_KEY}"  # pragma: allowlist secret\n')
    assert tooldock_cli("check", str(tmp_path / "tools")).returncode == 0


def test_configuration_files_built_to_exhaust_their_parsers_are_problems_found_at_once(tmp_path):
    """YAML and TOML nested thousands of levels deep (their parsers recurse per level and raise RecursionError)
    and a YAML alias bomb (nine lines that expand to 9**9 values when walked, as the credential search's YAML
    reader did): each is reported, nothing crashes or hangs, and a credential beside the aliases is still
    found (such a file is searched line by line)."""
    tools = tmp_path / "tools"
    for name in ("deep-yaml", "bomb", "deep-toml"):
        (tools / name).mkdir(parents=True)
    (tools / "deep-yaml" / "tooldock.yaml").write_text("description: " + "[" * 20000 + "]" * 20000 + "\n")
    bomb, previous = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n', "a"
    for name in "bcdefghi":
        bomb += f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]\n"
        previous = name
    (tools / "bomb" / "tooldock.yaml").write_text(bomb + f"env:\n  GITHUB_TOKEN: {FAKE_GITHUB}\n")
    (tools / "deep-toml" / "tools.toml").write_text("x = " + "[" * 20000 + "]" * 20000 + "\n")
    proc = subprocess.run([TOOLDOCK, "check", str(tools)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    assert "  deep-yaml/tooldock.yaml: invalid YAML: nested too deeply to read" in proc.stdout
    assert "  deep-toml/tools.toml: invalid TOML: nested too deeply to read" in proc.stdout
    assert "  bomb/tooldock.yaml:11: a credential (a GitHub Token)" in proc.stdout
    assert FAKE_GITHUB not in proc.stdout + proc.stderr


def test_a_bom_and_crlf_file_is_read_as_python_reads_it_and_a_symlink_loop_is_no_crash(tmp_path):
    """Editors on Windows save UTF-8 with a byte order mark and CRLF line ends: Python imports such a file, so
    the scan serves it; a symlink loop beside it (Path.resolve raises RuntimeError) is left out quietly."""
    folder = tmp_path / "tools" / "win"
    folder.mkdir(parents=True)
    tool = 'from fastmcp.tools import tool\r\n\r\n\r\n@tool\r\ndef bom(a: int) -> int:\r\n    """d."""\r\n    return a\r\n'
    (folder / "bom.py").write_bytes(b"\xef\xbb\xbf" + tool.encode())
    (folder / "loop2.py").symlink_to("loop1")
    (folder / "loop1").symlink_to("loop2.py")
    proc = tooldock_cli("check", str(tmp_path / "tools"), check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "win: 1 tool(s) (bom)" in proc.stdout


def test_a_missing_directory_is_a_clear_error():
    proc = tooldock_cli("check", "/nonexistent-tools-dir", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "tools directory '/nonexistent-tools-dir' does not exist or is not a directory" in proc.stderr


@pytest.mark.parametrize("command", ["check", "serve", "manager"])
def test_a_namespace_folder_given_for_tools_dir_is_an_error_that_names_its_parent(command):
    """`serve examples/basic-tool` served nothing, silently (the scan looks for sub-folders)."""
    args = [command, str(EXAMPLES / "basic-tool"), *(["--port", "0"] if command != "check" else [])]
    # a bounded wait: without the check, serve and manager would start and serve nothing until stopped
    proc = subprocess.run([TOOLDOCK, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{EXAMPLES / 'basic-tool'} is a namespace folder itself (tool files or a tools.toml in it)" in proc.stderr
    assert f"give its parent: tooldock {command} {EXAMPLES}" in proc.stderr
    assert "ready on" not in proc.stderr


def test_import_finds_what_only_importing_the_files_can(tmp_path):
    """`check --import` imports each namespace's files in its environment, as a worker would: a module that
    is not installed, a decorator that makes no tool and a requirement that does not install pass the static
    check and fail this one, each named; a clean namespace passes both."""
    from conftest import STATE_DIR

    tools = tmp_path / "tools"
    shutil.copytree(EXAMPLES / "basic-tool", tools / "basic-tool")
    broken = tools / "broken"
    broken.mkdir()
    (broken / "needs.py").write_text(
        "import no_such_module_here\nfrom fastmcp.tools import tool\n\n\n@tool\ndef f() -> int:\n    'F.'\n    return 1\n")
    (broken / "_helpers.py").write_text("def tool(fn):\n    return fn\n")
    (broken / "mixed.py").write_text(
        "import fastmcp.tools\nfrom _helpers import tool\n\n\n@fastmcp.tools.tool\ndef served(x: int) -> int:\n"
        "    'S.'\n    return x\n\n\n@tool\ndef lookalike(x: int) -> int:\n    'L.'\n    return x\n")
    shutil.copytree(EXAMPLES / "basic-tool", tools / "deps")
    (tools / "deps" / "requirements.txt").write_text("tooldock-no-such-package-xyz==1.0\n")
    env = {"TOOLDOCK_STATE_DIR": str(STATE_DIR)}  # the suite's cached worker environments
    assert json.loads(tooldock_cli("check", "--json", str(tools), env=env).stdout)["ok"] is True

    proc = tooldock_cli("check", "--import", "--json", str(tools), env=env, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "importing 3 namespace(s) in their environments" in proc.stderr
    found = {n["name"]: n for n in json.loads(proc.stdout)["namespaces"]}
    assert found["basic-tool"] == {"name": "basic-tool", "problems": [], "tools": ["say_hello"], "warnings": []}
    assert found["broken"]["tools"] == ["served"]
    assert [(p["file"], p["line"], p["code"]) for p in found["broken"]["problems"]] == [
        ("mixed.py", 12, "not_a_tool"), ("needs.py", 1, "dependency_error")]
    (deps,) = found["deps"]["problems"]
    assert deps["file"] == "requirements.txt" and deps["code"] == "dependency_error"
    assert "cannot install the dependencies of namespace 'deps'" in deps["message"] and found["deps"]["tools"] == []


def serve_with_a_port_taken(*args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """`tooldock serve EXAMPLES *args` with no bearer token set (so one would be generated and printed),
    while a socket holds a port; each PORT in `args` is that port."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "TOOLDOCK_BEARER_TOKEN"}
        command = [TOOLDOCK, "serve", str(EXAMPLES), *(str(port) if a == "PORT" else a for a in args)]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env), port
    finally:
        taken.close()


def test_serve_on_a_port_in_use_says_so_and_nothing_else(tmp_path):
    """The port is bound first: before, a generated bearer token (never used) was printed above the error."""
    proc, port = serve_with_a_port_taken("--port", "PORT")
    assert proc.returncode == 1
    assert proc.stderr == f"Error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_a_namespace_of_many_tools_names_the_first_twenty_and_counts_the_rest(tmp_path):
    many = tmp_path / "tools" / "many"
    many.mkdir(parents=True)
    defs = "".join(f"@tool\ndef t{i}(x: int) -> int:\n    '''Tool {i}.'''\n    return x\n\n\n" for i in range(25))
    (many / "tools.py").write_text("from fastmcp.tools import tool\n\n\n" + defs)
    proc = tooldock_cli("check", str(tmp_path / "tools"))
    names = ", ".join(f"t{i}" for i in range(20))
    assert f"many: 25 tool(s) ({names}, ... and 5 more (--json lists them all))" in proc.stdout.splitlines()
    report = json.loads(tooldock_cli("check", "--json", str(tmp_path / "tools")).stdout)
    assert report["namespaces"][0]["tools"] == [f"t{i}" for i in range(25)]


@pytest.mark.parametrize("command", [["serve", str(EXAMPLES), "--port", "0"], ["check", "--import", str(EXAMPLES)]])
def test_a_state_directory_that_cannot_be_made_is_one_clear_line(tmp_path, command):
    (tmp_path / "a-file").write_text("not a directory\n")
    state = tmp_path / "a-file" / "state"
    proc = subprocess.run([TOOLDOCK, *command], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TOOLDOCK_STATE_DIR": str(state)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.endswith(
        f"Error: the state directory {state} cannot be used: Not a directory; set TOOLDOCK_STATE_DIR to a "
        "directory this user can write (it holds the worker environments and the logs)\n"
    ), proc.stderr


def test_serve_with_the_manager_on_a_port_in_use_stops_before_serving(tmp_path):
    proc, port = serve_with_a_port_taken("--port", "0", "--manager", "--manager-port", "PORT")
    assert proc.returncode == 1  # the gateway used to serve on, its manager gone with one line
    assert proc.stderr == (  # the only line: no token printed first that would never be used
        f"Error: the manager cannot listen on 127.0.0.1:{port}: Address already in use (--manager-port)\n"
    )


def test_a_manager_that_dies_is_reported_and_the_gateway_serves_on(make_gateway):
    import signal

    from conftest import MANAGER_ARGS

    gw = make_gateway(EXAMPLES, args=MANAGER_ARGS)
    children = Path(f"/proc/{gw.proc.pid}/task/{gw.proc.pid}/children").read_text().split()
    (manager,) = [int(pid) for pid in children if b"manager" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    os.kill(manager, signal.SIGKILL)
    gw.wait_for(lambda: "tooldock: the manager exited with code -9; the gateway serves on without it" in gw.logs,
                timeout=10, what="the manager's exit to be reported")
    assert gw.call("multi-tool", "add", a=1, b=2).json() == {"result": 3}


def test_tool_names_clients_may_refuse_are_warnings_that_pass_the_check(tmp_path):
    """MCP's tool names are 1-128 of letters, digits, '_', '-', '.' (SEP-986): fastmcp serves others with a
    warning in the worker's log, and so does ToolDock; check names them with their lines, exit 0."""
    names = tmp_path / "tools" / "names"
    names.mkdir(parents=True)
    long = "t" * 129
    (names / "tools.py").write_text(
        "from fastmcp.tools import tool\n\n\n"
        "@tool(name='get weather')\ndef weather(city: str) -> str:\n    'Weather.'\n    return city\n\n\n"
        f"@tool(name='{long}')\ndef long(x: int) -> int:\n    'Long.'\n    return x\n\n\n"
        "@tool(name='ok.name-2')\ndef fine(x: int) -> int:\n    'Fine.'\n    return x\n"
    )
    proc = tooldock_cli("check", str(tmp_path / "tools"))
    assert proc.returncode == 0 and proc.stderr.endswith("1 namespace(s), 0 problem(s), 2 warning(s)\n"), proc.stderr
    lines = proc.stdout.splitlines()
    assert "  names/tools.py:5: warning: tool name 'get weather' has characters MCP tool names do not allow (' '): " \
           "clients may refuse the tool; use letters, digits, '_', '-' and '.' (e.g. @tool(name='get_weather'))" in lines
    assert "  names/tools.py:11: warning: tool name 'tttttttttttttttttttt'... is 129 characters long; MCP tool names " \
           "have at most 128 (clients may refuse the tool): give a shorter one with @tool(name=...)" in lines
    report = json.loads(tooldock_cli("check", "--json", str(tmp_path / "tools")).stdout)
    assert report["ok"] is True and report["problem_count"] == 0 and report["warning_count"] == 2
    warned = report["namespaces"][0]["warnings"]
    assert [(w["file"], w["line"], w["code"]) for w in warned] == [("tools.py", 5, "tool_name"), ("tools.py", 11, "tool_name")]
    assert report["namespaces"][0]["tools"] == ["get weather", long, "ok.name-2"]
