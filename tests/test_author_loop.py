"""The tool author's loop from the command line: `tooldock new` makes a namespace whose own tests pass under
`tooldock test` (in the namespace's environment, against it served as ToolDock serves it), `tooldock call`
calls one tool with no server, and bad input gets one clear line and a non-zero exit, never a traceback.
`tooldock install` is tests/test_install_cli.py's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES, STATE_DIR, tooldock_cli

ENV = {"TOOLDOCK_STATE_DIR": str(STATE_DIR)}


def run(*args: str, check: bool = True):
    return tooldock_cli(*args, env=ENV, check=check)


def one_line_error(proc, *words: str) -> None:
    """Refused with one `Error: ...` line on stderr naming `words`, exit 1, no traceback."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in errors[0], errors[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One namespace of each runnable template, made by `tooldock new`."""
    root = tmp_path_factory.mktemp("made")
    for name, template in (("greeter", "plain"), ("counter", "async"), ("words", "context")):
        proc = run("new", str(root / name), "--template", template)
        assert f"{root / name}/tests/test_tools.py" in proc.stdout.splitlines(), proc.stdout
    return root


def test_new_makes_a_namespace_with_config_requirements_and_a_test(made):
    for name in ("greeter", "counter", "words"):
        folder = made / name
        assert {p.name for p in folder.iterdir()} == {"tools.py", "tooldock.yaml", "requirements.txt", "README.md",
                                                     "tests"}
        assert "mcp_client" in (folder / "tests" / "test_tools.py").read_text()
    checked = json.loads(run("check", str(made), "--json").stdout)  # tests/ is not tools
    tools = {n["name"]: n["tools"] for n in checked["namespaces"]}
    assert checked["ok"], checked
    assert tools == {"counter": ["countdown"], "greeter": ["greet"], "words": ["count_words"]}


def test_new_upstream_makes_a_tools_toml(tmp_path):
    run("new", str(tmp_path / "clock"), "--template", "upstream")
    assert (tmp_path / "clock" / "tools.toml").is_file() and not list((tmp_path / "clock").glob("*.py"))
    checked = json.loads(run("check", str(tmp_path), "--json").stdout)
    assert checked["ok"] and checked["namespaces"][0]["servers"] == ["time"], checked


def test_new_refuses_a_bad_name_or_an_existing_folder(tmp_path):
    one_line_error(run("new", str(tmp_path / "Bad_Name"), check=False), "Bad_Name")
    (tmp_path / "taken").mkdir()
    one_line_error(run("new", str(tmp_path / "taken"), check=False), "exists")
    one_line_error(run("new", str(tmp_path / "nowhere" / "x"), check=False), "no such folder")


def test_the_made_namespaces_own_tests_pass_under_tooldock_test(made):
    proc = run("test", str(made / "greeter"), str(made / "counter"), str(made / "words"))
    assert proc.stdout.count(" passed in ") == 3, proc.stdout
    assert "3 of 3 namespace(s) passed" in proc.stderr


def test_a_failing_test_fails_the_run_and_names_the_namespace(made, tmp_path):
    broken = tmp_path / "greeter"
    shutil.copytree(made / "greeter", broken)
    test_file = broken / "tests" / "test_tools.py"
    test_file.write_text(test_file.read_text().replace('"Hello, Ada!"', '"Goodbye, Ada!"'))
    proc = run("test", str(broken), check=False)
    assert proc.returncode == 1 and "1 failed" in proc.stdout, proc.stdout + proc.stderr
    assert "failed: greeter" in proc.stderr


def test_tooldock_test_refuses_a_folder_without_tests_or_missing(tmp_path):
    one_line_error(run("test", str(EXAMPLES / "basic-tool"), check=False), "no tests/ folder")
    one_line_error(run("test", str(tmp_path / "missing"), check=False), "no such namespace folder")


def test_tests_are_not_in_the_image_and_editing_them_restarts_nothing(made):
    from tooldock.builder.build import _app_entries
    from tooldock.namespace.scanner import fingerprint

    folder = made / "greeter"
    paths = [e.path for e in _app_entries(folder, b"{}")]
    assert any(p.endswith("/tools.py") for p in paths) and not any("/tests" in p for p in paths), paths
    before = fingerprint(folder)
    (folder / "tests" / "test_more.py").write_text("def test_nothing():\n    pass\n")
    try:
        assert fingerprint(folder) == before
    finally:
        (folder / "tests" / "test_more.py").unlink()


def test_call_a_tool_of_each_example():
    assert run("call", str(EXAMPLES / "basic-tool"), "say_hello", "name=Ada").stdout == "Hello, Ada!\n"
    answer = json.loads(run("call", str(EXAMPLES / "multi-tool"), "add", '{"a": 2, "b": 3}', "--json").stdout)
    assert answer["structuredContent"] == {"result": 5.0} and answer["isError"] is False
    assert run("call", str(EXAMPLES / "multi-tool"), "reverse_text", "text=123").stdout == "321\n"  # kept a string
    listed = run("call", str(EXAMPLES / "multi-tool"), "--list").stdout.splitlines()
    assert [line.split()[0] for line in listed] == ["add", "multiply", "reverse_text", "word_count"]
    tools = json.loads(run("call", str(EXAMPLES / "async-tool"), "--list", "--json").stdout)
    assert [t["name"] for t in tools] == ["get_weather"] and "city" in tools[0]["inputSchema"]["properties"]


def test_call_a_context_tool_shows_its_progress_and_logs_on_stderr(made):
    proc = run("call", str(made / "words"), "count_words", "text=one two\nthree", "--json")
    assert json.loads(proc.stdout)["structuredContent"]["words"] == 3
    assert "count_words: progress 2/2" in proc.stderr and "counted 3 word(s)" in proc.stderr, proc.stderr


def test_a_failing_tool_exits_non_zero_with_its_error():
    proc = run("call", str(EXAMPLES / "multi-tool"), "add", "a=x", "b=1", check=False)
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert "tool 'add' failed: invalid_arguments" in proc.stderr
    answer = run("call", str(EXAMPLES / "multi-tool"), "add", "a=x", "b=1", "--json", check=False)
    assert answer.returncode == 1 and json.loads(answer.stdout)["isError"] is True


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("multi-tool", "nope"), ("no tool 'nope'", "add")),
        (("multi-tool", "add", '{"a": 2,'), ("not valid JSON",)),
        (("multi-tool", "add", "a"), ("key=value",)),
        (("no-such-folder", "add"), ("no such namespace folder",)),
        (("multi-tool",), ("--list",)),
    ],
    ids=["unknown-tool", "bad-json", "not-key-value", "missing-folder", "no-tool"],
)
def test_bad_input_to_call_gets_one_clear_line(args, words):
    one_line_error(run("call", str(EXAMPLES / args[0]), *args[1:], check=False), *words)
